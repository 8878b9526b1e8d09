// Reading the JSON files of a Hugging Face model folder (config.json, tokenizer.json, ...) into
// nlohmann::json without letting an exception out: a missing file or a syntax error is a Status
// naming the file. Depends on base and nlohmann_json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace ponder {

// Reads and parses `path`; "cannot open DIR/config.json: No such file or directory" or
// "DIR/config.json: not valid JSON: <parser message>".
Expected<nlohmann::json> read_json_file(const std::string& path);

// Writes `j` to `path` (indented), for the GGUF -> HF export.
Status write_json_file(const std::string& path, const nlohmann::json& j);

// The JSON type of a value for messages: "string", "number", "object"...
inline std::string json_kind(const nlohmann::json& j) { return j.type_name(); }

}  // namespace ponder
