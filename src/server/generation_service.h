// The step every API family shares between parsing a request and framing its answer: the
// prompt's tokens (chat messages through the model's template, or a raw prompt with special
// tokens parsed, or ids given directly), the context check with both counts, and submission to
// the Engine with a sink that posts each event to the I/O thread. The client going away cancels
// the request (within one engine step, prefill included).
// Depends on server/server_context.h, server/http_server.h, server/api_error.h.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "server/api_error.h"
#include "server/http_server.h"
#include "server/server_context.h"

namespace ponder::server {

struct Submission {
  uint64_t id = 0;
  int32_t n_prompt = 0;
  const char* cache = "off";  // the response cache: "hit" (replayed, no engine work), "miss", "off"
  std::string cache_question;  // --cache-match similar: the cached question that matched
};

// The prompt's tokens, or the error to answer with.
std::optional<ApiError> prompt_tokens(const ServerContext& ctx, const GenerationRequest& g, std::vector<int32_t>* out);

// Submits g; on_event runs on the I/O thread for every engine event of the request.
std::optional<ApiError> submit_generation(ServerContext& ctx, const GenerationRequest& g, Responder& r,
                                          std::function<void(EngineEvent&&)> on_event, Submission* out);

}  // namespace ponder::server
