// The routing key of a request (docs/scaling.md): what a load balancer hashes so that every turn
// of one conversation, and every request sharing a long system prompt, lands on the replica that
// holds its KV prefix. The same for every turn of a conversation, and computable by any client:
//   1. the X-Conversation-Id header (our web page sends it), else
//   2. the request's `prompt_cache_key` (OpenAI's field), else
//   3. its `user`, else
//   4. "h-" and 16 hex digits of FNV-1a-64 over the UTF-8 of the first system message, a 0x1f
//      byte, and the first user message (a raw prompt: its first 1024 bytes).
// Ponder returns it in the X-Ponder-Route-Key header, so a client can send it back on the next
// turn (the shipped nginx configuration hashes on either header).
// Depends on server/common/generation_request.h.
#pragma once

#include <cstdint>
#include <string>

#include "server/common/generation_request.h"

namespace ponder::server {

uint64_t fnv1a64(const std::string& s);
std::string route_key(const GenerationRequest& g);

}  // namespace ponder::server
