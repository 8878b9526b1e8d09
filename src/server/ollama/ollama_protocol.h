// Ollama's request bodies for POST /api/chat and /api/generate: stream (default true), think
// (true / false / an effort), keep_alive, options (Ollama's sampling and runner options, each
// honoured, fixed or refused: field_policy.h), format, tools, messages or prompt (with system, or
// raw). Parsed into a GenerationRequest; an error is the message of Ollama's {"error": "..."}
// shape, always a 400.
// Depends on server/common/generation_request.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/common/field_policy.h"
#include "server/common/generation_request.h"

namespace ponder::server {

// What Ollama's bodies say beyond the generation request.
struct OllamaRequest {
  bool show_thinking = true;  // the reply shows the thinking (think false or absent: it does)
  // Ollama's load / unload idiom: no prompt (or no messages) at all; answered at once with
  // done_reason "load", or "unload" when keep_alive is 0.
  bool load_only = false;
  std::optional<double> keep_alive_s;  // keep_alive in seconds (< 0: forever)
};

// chat_shape: /api/chat (messages) rather than /api/generate (prompt).
std::optional<std::string> parse_ollama_request(const nlohmann::json& body,
                                                const ServingDefaults& defaults, bool chat_shape,
                                                GenerationRequest* g, OllamaRequest* extra);

// What /api/chat (chat) or /api/generate does with each top-level field, and with each option.
const FieldPolicy& ollama_field_policy(bool chat);
const FieldPolicy& ollama_options_policy();

// keep_alive: a number of seconds or a Go duration ("5m", "1h30m", "-1", "0"); nullopt when it is
// neither.
std::optional<double> parse_keep_alive(const nlohmann::json& v);

}  // namespace ponder::server
