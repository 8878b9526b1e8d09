// llama-server's routes that tools and dashboards rely on: GET /health (503 until ready and while
// draining), POST /tokenize (with pieces), POST /detokenize, GET /props, GET /metrics
// (Prometheus text under llama.cpp's metric names, llamacpp:*, plus Ponder's own).
// Depends on server/transport/router.h, server/common/server_context.h.
#pragma once

#include "server/common/server_context.h"
#include "server/transport/router.h"

namespace ponder::server {

void add_llama_routes(Router& router, ServerContext& ctx);

}  // namespace ponder::server
