// ServerContext: what every route needs to serve a request: the engine, the tokenizer and chat
// template of the loaded model, its public name, the defaults for omitted fields, and a way to
// run code on the I/O thread (engine events are posted there, never handled on the engine
// thread). Owned by Server; routes hold a reference.
// Depends on runtime/engine.h, text, server/common/generation_request.h.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "grammar/grammar.h"
#include "runtime/engine.h"
#include "server/cache/response_cache.h"
#include "server/common/generation_request.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ponder::server {

struct ServerContext {
  Engine& engine;
  const text::Tokenizer& tokenizer;
  const text::ChatTemplate& chat_template;
  ServerContext(Engine& e, const text::Tokenizer& t, const text::ChatTemplate& c)
      : engine(e), tokenizer(t), chat_template(c) {}
  std::string model_name;  // what /v1/models lists and responses carry (--alias)
  std::string replica_id;  // --replica-id: in every answer's X-Ponder-Replica and in request ids
  ServingDefaults defaults;
  int64_t created_unix = 0;  // when the model was loaded (/v1/models "created")
  std::function<void(std::function<void()>)> post;           // run on the I/O thread
  std::function<void(double, std::function<void()>)> after;  // run on the I/O thread, later
  std::string reasoning_field = "reasoning_content";         // OpenAI chunks' name for the thinking
  double keepalive_s =
      5;  // SSE comment lines this often until the first token (long queues, prefills)
  ResponseCache* cache = nullptr;  // null: --no-response-cache
  std::string fingerprint;         // the model file's (response cache keys)
  std::string numerics;            // the model's (response cache keys)
  // Chat completion ids (what the stream's chunks carry) -> engine requests, while they run, for
  // "answer now" (POST /v1/answer_now). I/O thread only.
  std::unordered_map<std::string, uint64_t> active;
  grammar::GrammarCache grammars{64};  // compiled constraints by their text (their masks shared)
  std::atomic<bool> ready{false};      // /health: 503 until the model is loaded, and while draining
  std::atomic<bool> draining{false};   // no new generation requests
  bool r1() const { return chat_template.format() == text::ChatFormat::kDeepSeekR1; }
};

}  // namespace ponder::server
