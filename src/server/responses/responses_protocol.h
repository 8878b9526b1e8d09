// The Responses API's request (POST /v1/responses): `input` as a string or as items (messages,
// function calls and their outputs, reasoning items), `instructions`, `previous_response_id`
// (the stored conversation it continues), `tools` / `tool_choice` in the Responses shape,
// item_reference resolved from the stored responses, `text.format` through the structured-outputs
// engine, `reasoning.effort` as a thinking control, sampling and limits. Read into a
// GenerationRequest plus what the response object echoes. As OpenAI does, a field it does not
// define is a 400 ("Unknown parameter"), a field it defines that Ponder does not implement is a 400
// naming it, and every malformed item names its path. Depends on server/common/ (field readers,
// request fields, the generation request) and server/openai/openai_tools.h (the tools' grammar and
// prompt).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/common/api_error.h"
#include "server/common/generation_request.h"

namespace ponder::server {

struct ResponsesRequest {
  GenerationRequest g;
  // This turn's input as items (a string input becomes one user message item): kept with the
  // response so that the next turn's previous_response_id finds the whole conversation.
  nlohmann::json input_items = nlohmann::json::array();
  // The request's settings as the response object echoes them (instructions, max_output_tokens,
  // temperature, top_p, tools, tool_choice, text, reasoning, parallel_tool_calls, store, ...).
  nlohmann::json settings = nlohmann::json::object();
  std::string previous_response_id;
  bool store = true;
};

// The items of a stored response's conversation (oldest first), or nullopt when no response of
// that id is stored.
using ConversationLookup = std::function<std::optional<nlohmann::json>(const std::string& id)>;

// A stored item (input or output of a stored response) by its id, or nullopt.
using ItemLookup = std::function<std::optional<nlohmann::json>(const std::string& id)>;

// Parses a request body into *out; an error names the field at fault. `lookup` resolves
// previous_response_id, `find_item` an input item of type item_reference.
std::optional<ApiError> parse_responses_request(const nlohmann::json& body,
                                                const ServingDefaults& defaults,
                                                const ConversationLookup& lookup,
                                                ResponsesRequest* out,
                                                const ItemLookup& find_item = nullptr);

}  // namespace ponder::server
