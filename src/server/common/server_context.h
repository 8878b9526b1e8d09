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
#include "server/common/model_facts.h"
#include "server/transport/http_server.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace ponder::server {

// The prompt and generation times of finished requests, each request's own (llama-server's
// throughput figures: tokens over the time those requests spent on them, not over wall time).
struct RequestTimes {
  int64_t prompt_tokens = 0;  // computed (reused ones are not)
  double prompt_s = 0;
  int64_t gen_tokens = 0;
  double gen_s = 0;
  void add(const GenerateStats& s) {
    prompt_tokens += s.n_prompt - s.n_reused;
    prompt_s += s.prompt_s;
    gen_tokens += s.n_gen;
    gen_s += s.gen_s;
  }
};

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
  ModelFacts model;                // the file's template, size, quantization, metadata
  std::string numerics;            // the model's (response cache keys)
  // Chat completion ids (what the stream's chunks carry) -> engine requests, while they run, for
  // "answer now" (POST /v1/answer_now). I/O thread only.
  std::unordered_map<std::string, uint64_t> active;
  // Finished requests' times (I/O thread): since the start, and since the last /metrics scrape
  // (llama-server's prompt_tokens_seconds / predicted_tokens_seconds are over that window).
  RequestTimes times_total, times_since_scrape;
  const HttpStatusCounts* statuses = nullptr;  // answers by HTTP status (/metrics' refusals)
  grammar::GrammarCache grammars{64};  // compiled constraints by their text (their masks shared)
  std::atomic<bool> ready{false};      // /health: 503 until the model is loaded, and while draining
  std::atomic<bool> draining{false};   // no new generation requests
  bool r1() const { return chat_template.format() == text::ChatFormat::kDeepSeekR1; }
};

}  // namespace ponder::server
