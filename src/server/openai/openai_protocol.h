// The OpenAI API's request schemas and response shapes (/v1/chat/completions, /v1/completions):
// parsing with every known field checked (type and range, never clamped), fields Ponder does not
// support refused by name, unknown fields named in X-Ponder-Ignored-Fields (field_policy.h). The
// response builders produce OpenAI's exact JSON: whole responses, stream chunks, usage.
// Depends on server/common/ (field readers, the generation request).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/common/api_error.h"
#include "server/common/field_policy.h"
#include "server/common/field_reader.h"
#include "server/common/generation_request.h"
#include "text/tokenizer.h"

namespace ponder::server {

// Parse a request body into *out; an error names the field at fault.
std::optional<ApiError> parse_chat_request(const nlohmann::json& body,
                                           const ServingDefaults& defaults, GenerationRequest* out);
std::optional<ApiError> parse_completion_request(const nlohmann::json& body,
                                                 const ServingDefaults& defaults,
                                                 GenerationRequest* out);

// What the chat (chat = true) or completions route does with each field it knows.
const FieldPolicy& openai_field_policy(bool chat);

// The usage object of OpenAI (with cached and reasoning token details).
struct Usage {
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t reasoning_tokens = 0;
  // Speculative decoding: guesses verified and kept (OpenAI's predicted-output counts say so).
  int64_t drafted_tokens = 0, draft_accepted_tokens = 0;
  bool response_cached = false;          // replayed from the response cache (Ponder's field)
  std::string response_cached_question;  // --cache-match similar: the question it was cached for
  nlohmann::json to_json() const;
};

// One token's logprob entry: chat shape {token, logprob, bytes, top_logprobs}.
nlohmann::json chat_logprob_entry(const text::Tokenizer& tok, const EngineEvent& ev);

// JSON text, with invalid UTF-8 (a token's raw bytes) replaced rather than thrown on.
std::string dump(const nlohmann::json& j);

}  // namespace ponder::server
