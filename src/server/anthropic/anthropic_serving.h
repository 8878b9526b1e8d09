// Anthropic's Messages API on the server: POST /v1/messages (a job per request turning the
// engine's events into Anthropic's SSE events or a whole message) and
// POST /v1/messages/count_tokens, and Anthropic's error shape for every refusal under
// /v1/messages (the router's 404, 405 and 401 included).
// Depends on server/common/ (the generation service), server/transport/ and the protocol
// beside it.
#pragma once

#include "server/common/server_context.h"
#include "server/transport/router.h"

namespace ponder::server {

void add_anthropic_routes(Router& router, ServerContext& ctx);

}  // namespace ponder::server
