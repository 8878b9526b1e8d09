// The OpenAI routes: /v1/chat/completions and /v1/completions (streamed as SSE in OpenAI's chunk
// shape ending in "data: [DONE]", or whole), and /v1/models. R1's thinking goes out as
// `reasoning_content` deltas, its answer as `content`; usage carries cached prompt tokens and
// reasoning tokens.
// Depends on server/transport/router.h, server/common/server_context.h,
// server/openai/openai_protocol.h, server/common/generation_service.h.
#pragma once

#include "server/common/server_context.h"
#include "server/transport/router.h"

namespace ponder::server {

void add_openai_routes(Router& router, ServerContext& ctx);

}  // namespace ponder::server
