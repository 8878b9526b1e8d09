// OpenAI's Responses API: POST /v1/responses (a whole response object, or typed SSE events with
// `event:` lines and sequence numbers: response.created ... response.completed), GET and DELETE
// /v1/responses/{id} and GET /v1/responses/{id}/input_items over the bounded ResponseStore, which
// also serves previous_response_id.
// R1's thinking is a reasoning item, its answer a message item, its tool calls function_call
// items; usage counts cached input tokens and reasoning tokens.
// Depends on server/transport/router.h, server/common/server_context.h,
// server/common/generation_service.h, server/responses/ (protocol, store, output).
#pragma once

#include "server/common/server_context.h"
#include "server/responses/response_store.h"
#include "server/transport/router.h"

namespace ponder::server {

// The routes keep `store` alive (it is shared with the jobs still answering).
void add_responses_routes(Router& router, ServerContext& ctx,
                          std::shared_ptr<ResponseStore> store = nullptr);

}  // namespace ponder::server
