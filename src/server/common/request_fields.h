// The request fields every API family reads the same way: the sampling options under OpenAI's
// names (temperature, top_p, top_k, min_p, penalties, seed, stop; Ollama's `options` too) and the
// answer's constraint (OpenAI's response_format, llama.cpp's grammar and json_schema, a JSON
// Schema from any family), each checked and refused by name.
// Depends on server/common/field_reader.h, server/common/generation_request.h,
// grammar/json_schema.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "server/common/field_reader.h"
#include "server/common/generation_request.h"

namespace ponder::server {

// The sampling fields every family shares. True when the request gave a seed.
bool read_sampling(FieldReader& f, GenerateOptions* options);

// The answer's constraint: OpenAI's response_format (text, json_object, json_schema) or
// llama.cpp's grammar (GBNF) or json_schema, at most one; a schema keyword Ponder does not
// support fails naming it.
void read_constraint(FieldReader& f, const nlohmann::json& body, GenerationRequest* out);

// Sets the constraint of a request from a JSON Schema, or fails naming the field.
void constrain_to_schema(FieldReader& f, const nlohmann::json& schema, const std::string& field,
                         GenerationRequest* out);

// A reasoning effort as a thinking control: "none" and "minimal" turn the thinking off, "low",
// "medium" and "high" (DeepSeek's "xhigh" and "max" too) set the thinking budget from d.efforts.
// False (nothing set) for another word.
bool apply_reasoning_effort(const std::string& effort, const ServingDefaults& d,
                            GenerationRequest* out);

}  // namespace ponder::server
