// llama-server's POST /completion: a raw prompt (text or ids; special tokens parsed), n_predict
// (-1: up to the context), llama.cpp's sampling names, n_probs, and its answer shapes: one JSON
// object with content, stop_type and timings, or a stream of `data: {"content", "stop": false}`
// events ending with one that has "stop": true and the timings (no [DONE], as llama-server).
// Depends on server/transport/router.h, server/common/server_context.h.
#pragma once

#include "server/common/server_context.h"
#include "server/transport/router.h"

namespace ponder::server {

void add_llama_completion_route(Router& router, ServerContext& ctx);

}  // namespace ponder::server
