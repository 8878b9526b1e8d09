// The core of Ollama's API, so front-ends written for Ollama work unchanged: POST /api/chat and
// /api/generate (NDJSON streaming by default, `think`, thinking as message.thinking in chat and
// top-level `thinking` in generate, `options`), GET /api/tags and /api/ps (name:tag model names),
// POST /api/show (with capabilities), GET /api/version. Errors in Ollama's shape {"error": "..."}.
// Depends on server/transport/router.h, server/common/server_context.h.
#pragma once

#include "server/common/server_context.h"
#include "server/transport/router.h"

namespace ponder::server {

void add_ollama_routes(Router& router, ServerContext& ctx);

}  // namespace ponder::server
