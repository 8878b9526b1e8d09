// ServerContext: what every route shares whatever model a request names: the models offered
// (the registry: a request asks it for its model, a ModelContext), the defaults for omitted
// fields, the response cache, and a way to run code on the I/O thread (engine events are posted
// there, never handled on the engine thread). Owned by Server; routes hold a reference.
// Depends on runtime/engine.h, server/common/generation_request.h, server/common/model_context.h.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>

#include "runtime/engine.h"
#include "server/cache/response_cache.h"
#include "server/common/generation_request.h"
#include "server/common/model_context.h"
#include "server/transport/http_server.h"

namespace ponder::server {

class ModelRegistry;

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

// A running request that "answer now" may reach: its model (kept loaded) and engine id.
struct ActiveRequest {
  ModelRef model;
  uint64_t id = 0;
};

struct ServerContext {
  ModelRegistry* models = nullptr;  // every model offered, by name (server/models/)
  std::string replica_id;  // --replica-id: in every answer's X-Ponder-Replica and in request ids
  ServingDefaults defaults;
  std::function<void(std::function<void()>)> post;           // run on the I/O thread
  std::function<void(double, std::function<void()>)> after;  // run on the I/O thread, later
  std::string reasoning_field = "reasoning_content";         // OpenAI chunks' name for the thinking
  double keepalive_s =
      5;  // SSE comment lines this often until the first token (long queues, prefills)
  ResponseCache* cache = nullptr;  // null: --no-response-cache; keys hold the model's fingerprint
  // Chat completion ids (what the stream's chunks carry) -> engine requests, while they run, for
  // "answer now" (POST /v1/answer_now). I/O thread only.
  std::unordered_map<std::string, ActiveRequest> active;
  // Finished requests' times (I/O thread): since the start, and since the last /metrics scrape
  // (llama-server's prompt_tokens_seconds / predicted_tokens_seconds are over that window).
  RequestTimes times_total, times_since_scrape;
  const HttpStatusCounts* statuses = nullptr;  // answers by HTTP status (/metrics' refusals)
  std::atomic<bool> ready{false};     // /health: 503 until the server listens, and while draining
  std::atomic<bool> draining{false};  // no new generation requests
};

}  // namespace ponder::server
