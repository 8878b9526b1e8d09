// JSON Schema -> GBNF: the grammar of the JSON texts a schema accepts, for structured outputs
// (OpenAI's response_format json_schema, Ollama's format, llama.cpp's json_schema) and tool-call
// arguments. Covers what the SDKs send (docs/structured-outputs.md lists it); a keyword that is
// not supported is an error naming it and where it is, never silently dropped. Whitespace
// between tokens is bounded so a model cannot pad forever.
// Depends on base and nlohmann::json only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ponder::grammar {

// A whole grammar whose `root` is the schema's value (no leading or trailing whitespace).
Expected<std::string> json_schema_to_gbnf(const nlohmann::json& schema);

// The rules of the schema's value, every rule name starting with `prefix` (letters, digits and
// '-'); the value's own rule is named exactly `prefix`. For embedding several schemas in one
// grammar (tool calls: one per function).
Expected<std::string> json_schema_rules(const nlohmann::json& schema, std::string_view prefix);

// The same for a schema parsed as nlohmann::ordered_json, whose objects keep the order they were
// written in: properties are generated in their declaration order (nlohmann::json sorts keys).
Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema);
Expected<std::string> json_schema_rules(const nlohmann::ordered_json& schema,
                                        std::string_view prefix);

// Any JSON object (response_format json_object, Ollama's format "json"): a whole grammar.
std::string json_object_gbnf();

}  // namespace ponder::grammar
