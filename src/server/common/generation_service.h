// The step every API family shares between parsing a request and framing its answer: the
// prompt's tokens (chat messages through the model's template, or a raw prompt with special
// tokens parsed, or ids given directly), the context check with both counts, and submission to
// the Engine with a sink that posts each event to the I/O thread. The client going away cancels
// the request (within one engine step, prefill included).
// Depends on server/common/server_context.h, server/transport/http_server.h,
// server/common/api_error.h.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "server/common/api_error.h"
#include "server/common/route_key.h"
#include "server/common/server_context.h"
#include "server/transport/http_server.h"

namespace ponder::server {

struct Submission {
  uint64_t id = 0;
  int32_t n_prompt = 0;
  const char* cache = "off";  // the response cache: "hit" (replayed, no engine work), "miss", "off"
  std::string cache_question;  // --cache-match similar: the cached question that matched
};

// The prompt's tokens, or the error to answer with.
std::optional<ApiError> prompt_tokens(const ModelContext& m, const GenerationRequest& g,
                                      std::vector<int32_t>* out, bool* opens_thinking = nullptr);

// The prompt_progress object of llama.cpp for a kProgress event.
nlohmann::json prompt_progress(const EngineEvent& ev);

// Submits g to model m; on_event runs on the I/O thread for every engine event of the request.
std::optional<ApiError> submit_generation(ServerContext& ctx, const ModelRef& m,
                                          const GenerationRequest& g, Responder& r,
                                          std::function<void(EngineEvent&&)> on_event,
                                          Submission* out);

// The unknown fields of g for the X-Ponder-Ignored-Fields header (logged once per request).
std::string ignored_fields_note(const GenerationRequest& g);

// submit_generation for a job object: its on_event(EngineEvent&&) gets the events (the job stays
// alive while they come), and the answer's X-Ponder-Cache header is set.
template <typename Job>
std::optional<ApiError> submit_job(ServerContext& ctx, const ModelRef& m,
                                   const GenerationRequest& g, Responder& r,
                                   const std::shared_ptr<Job>& job, Submission* sub) {
  auto e = submit_generation(
      ctx, m, g, r, [job](EngineEvent&& ev) { job->on_event(std::move(ev)); }, sub);
  if (!e) {
    r.add_header("X-Ponder-Cache", sub->cache);
    r.add_header("X-Ponder-Route-Key", route_key(g));
    if (!g.ignored_fields.empty()) r.add_header("X-Ponder-Ignored-Fields", ignored_fields_note(g));
  }
  return e;
}

}  // namespace ponder::server
