// What the server says about its model file (Ollama's /api/show and /api/tags, llama-server's
// /props): the chat template's text, the parameter count, the quantization level, the file size
// and the file's scalar metadata (Ollama's model_info), read once at start.
// Depends on gguf/gguf_file.h and nlohmann-json.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"

namespace ponder::server {

struct ModelFacts {
  std::string chat_template;  // the file's tokenizer.chat_template (Jinja text; "" none)
  int64_t parameters = 0;
  int64_t file_size = 0;
  std::string quantization;    // "Q4_K_M", from general.file_type ("" unknown)
  std::string parameter_size;  // "1.8B", "494M" (Ollama's way of saying it)
  nlohmann::json model_info = nlohmann::json::object();  // scalar metadata + parameter count
};

ModelFacts read_model_facts(const GgufFile& file);

// A GGUF value as JSON; arrays (vocabularies) are summarised by type and length.
nlohmann::json gguf_value_json(const GgufValue& v);

}  // namespace ponder::server
