// Tests only: a tiny real-format model of ../shared/models (file, tokenizer, Qwen2 model), loaded
// with gtest expectations on every step.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gguf/gguf_file.h"
#include "model/qwen2_model.h"
#include "text/tokenizer.h"

namespace ponder {

struct TinyModel {
  GgufFile file;
  text::Tokenizer tokenizer;
  std::unique_ptr<Qwen2Model> model;
};

// type: "Q8_0", "Q4_K_M", "F16", ... (../shared/models/tiny-<type>.gguf)
inline std::unique_ptr<TinyModel> load_tiny_model(const std::string& type) {
  auto file = GgufFile::open(std::string(PONDER_SHARED_DIR) + "/models/tiny-" + type + ".gguf");
  EXPECT_TRUE(file.has_value()) << type;
  auto tok = text::Tokenizer::from_gguf(*file);
  EXPECT_TRUE(tok.has_value());
  auto m = std::make_unique<TinyModel>(TinyModel{std::move(*file), std::move(*tok), nullptr});
  auto model = Qwen2Model::load(m->file);
  EXPECT_TRUE(model.has_value());
  m->model = std::move(*model);
  return m;
}

}  // namespace ponder
