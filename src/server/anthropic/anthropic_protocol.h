// Anthropic's Messages API (POST /v1/messages, /v1/messages/count_tokens): the request schema
// read into a GenerationRequest, and Anthropic's error shape. Anthropic validates strictly, so
// this parser does too: an unknown field is a 400 ("FIELD: Extra inputs are not permitted", the
// path in Anthropic's dotted form), a documented field Ponder does not implement is a 400 that
// names it, and values are checked, never clamped. docs/server.md has the field table.
// Depends on server/common/ (field readers, the generation request, the error) and
// grammar/tool_calls.h; nothing of the transport.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/common/api_error.h"
#include "server/common/field_policy.h"
#include "server/common/generation_request.h"

namespace ponder::server {

// The minimum of thinking.budget_tokens (Anthropic's rule, kept so clients see the same 400s).
inline constexpr int64_t kMinThinkingBudget = 1024;

// The body's top-level fields (/v1/messages, or count_tokens): honoured, fixed at the value that
// says what Ponder does, or refused naming what to send instead (docs/server.md has the table).
FieldPolicy anthropic_field_policy(bool count_tokens);

// Parses a Messages request into *out (chat messages with R1's tool roles, sampling, thinking,
// the tools' grammar). count_tokens: the body of /v1/messages/count_tokens (no max_tokens, no
// sampling or stream fields). An error names the field at fault.
std::optional<ApiError> parse_messages_request(const nlohmann::json& body,
                                               const ServingDefaults& defaults, bool count_tokens,
                                               GenerationRequest* out);

// Anthropic's error type for an HTTP status (invalid_request_error, authentication_error,
// not_found_error, rate_limit_error, overloaded_error, api_error, ...).
std::string anthropic_error_type(int status);
// {"type": "error", "error": {"type": ..., "message": ...}}
nlohmann::json anthropic_error_json(const ApiError& e);

// Anthropic's stop_reason for the engine's finish reason.
std::string anthropic_stop_reason(const std::string& engine_reason, bool called_tools,
                                  bool hit_stop_sequence);

}  // namespace ponder::server
