// Ollama's request bodies for POST /api/chat and /api/generate: stream (default true), think,
// options (sampling under OpenAI's names, num_predict), messages (system / user / assistant with
// string content) or prompt (with system, or raw). Parsed into a GenerationRequest; an error is
// the message of Ollama's {"error": "..."} shape, always a 400.
// Depends on server/common/generation_request.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/common/generation_request.h"

namespace ponder::server {

// chat_shape: /api/chat (messages) rather than /api/generate (prompt). *think: whether the
// reply shows the model's thinking (Ollama's `think`, default true).
std::optional<std::string> parse_ollama_request(const nlohmann::json& body,
                                                const ServingDefaults& defaults, bool chat_shape,
                                                GenerationRequest* g, bool* think);

}  // namespace ponder::server
