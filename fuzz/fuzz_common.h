// What the fuzz targets share: the tokenizer of a small real-format model (../shared/models),
// loaded once, and an allocation bound (a target that asks for more than kMaxAlloc at once is a
// finding: libFuzzer's -malloc_limit_mb, set by scripts/fuzz.sh, reports it).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "text/tokenizer.h"

namespace ponder::fuzz {

// ../shared/models/tiny-Q8_0.gguf ($PONDER_SHARED_DIR overrides the build's shared directory).
inline std::string tiny_model_path() {
  const char* dir = std::getenv("PONDER_SHARED_DIR");
  return std::string(dir != nullptr ? dir : PONDER_SHARED_DIR) + "/models/tiny-Q8_0.gguf";
}

inline const text::Tokenizer& tokenizer() {
  static std::unique_ptr<text::Tokenizer> t = [] {
    const std::string path = tiny_model_path();
    auto file = GgufFile::open(path);
    if (!file.has_value()) {
      std::fprintf(stderr, "fuzz: cannot open %s: %s\n", path.c_str(),
                   file.status().message().c_str());
      std::abort();
    }
    auto tok = text::Tokenizer::from_gguf(*file);
    if (!tok.has_value()) std::abort();
    return std::make_unique<text::Tokenizer>(std::move(*tok));
  }();
  return *t;
}

}  // namespace ponder::fuzz
