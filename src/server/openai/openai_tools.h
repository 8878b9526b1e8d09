// OpenAI's tool calling on the chat route: `tools`, `tool_choice`, `parallel_tool_calls`, an
// assistant message's `tool_calls` and `role: "tool"` results, read into a GenerationRequest:
// the function list goes into the system prompt (grammar/tool_calls.h render_tool_prompt), the
// answer is constrained by the calls' grammar, and the serving job parses the calls back out.
// Every malformed piece is a 400 naming the field.
// Depends on server/common/field_reader.h, server/common/generation_request.h,
// grammar/tool_calls.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "grammar/tool_calls.h"
#include "server/common/field_reader.h"
#include "server/common/generation_request.h"

namespace ponder::server {

// One message's tool_calls (assistant) into `m`; false after f.fail().
bool read_message_tool_calls(FieldReader& f, const nlohmann::json& message,
                             const std::string& where, text::ChatMessage* m);

// tools / tool_choice / parallel_tool_calls of the body; the messages must be read first (the
// tool list joins the system prompt). Also checks every tool result answers an earlier call.
void read_tools(FieldReader& f, const nlohmann::json& body, GenerationRequest* out);

// What the two API families share: the functions of a `tools` array (OpenAI's shape, which
// Ollama's is too), and the request constrained to call them (the list joins the system prompt).
std::vector<grammar::ToolFunction> read_functions(FieldReader& f, const nlohmann::json& tools);
void constrain_to_tools(FieldReader& f, const std::vector<grammar::ToolFunction>& tools,
                        grammar::ToolChoiceMode mode, const std::string& named, bool parallel,
                        GenerationRequest* out);

// A tool_choice that names one function: true when `tools` has it, else f fails naming it.
bool require_named_tool(FieldReader& f, const std::vector<grammar::ToolFunction>& tools,
                        const std::string& named);

// An id for the index-th call of an answer (OpenAI's "call_...").
std::string tool_call_id(const std::string& completion_id, int32_t choice, int32_t index);

}  // namespace ponder::server
