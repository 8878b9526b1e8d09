// Helpers shared by the text tests: the shared vocabulary, loaded once.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "gguf/gguf_file.h"
#include "text/tokenizer.h"

namespace ponder::text::testing {

inline std::string shared_path(const std::string& rel) {
  return std::string(PONDER_SHARED_DIR) + "/" + rel;
}

// The tokenizer of vocab-r1-qwen.gguf; the test fails (not crashes) when it cannot be loaded.
inline const Tokenizer* r1_tokenizer() {
  static const Tokenizer* tok = []() -> const Tokenizer* {
    auto file = GgufFile::open(shared_path("models/vocab-r1-qwen.gguf"));
    if (!file) {
      ADD_FAILURE() << file.status().message();
      return nullptr;
    }
    auto t = Tokenizer::from_gguf(*file);
    if (!t) {
      ADD_FAILURE() << t.status().message();
      return nullptr;
    }
    return new Tokenizer(std::move(t).value());
  }();
  return tok;
}

}  // namespace ponder::text::testing
