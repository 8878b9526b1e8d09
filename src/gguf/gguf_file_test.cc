#include "gguf/gguf_file.h"

#include <gtest/gtest.h>

#include <string>

namespace ponder {
namespace {

const std::string kModels = std::string(PONDER_SHARED_DIR) + "/models/";

TEST(GgufFileTest, ReadsTinyModelMetadataAndTensors) {
  auto f = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(f.has_value()) << f.status().message();
  EXPECT_EQ(f->get_string("general.architecture").value(), "qwen2");
  EXPECT_EQ(f->get_u32("qwen2.block_count").value(), 2u);
  EXPECT_EQ(f->get_u32("qwen2.embedding_length").value(), 256u);
  EXPECT_EQ(f->get_u32("qwen2.attention.head_count").value(), 4u);
  EXPECT_EQ(f->get_u32("qwen2.attention.head_count_kv").value(), 2u);
  EXPECT_EQ(f->get_u32("qwen2.feed_forward_length").value(), 768u);
  auto tokens = f->get_string_array("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.has_value());
  EXPECT_EQ((*tokens)->size(), 8224u);
  const TensorInfo* embd = f->find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, GgmlType::F32);
  EXPECT_EQ(embd->shape, (std::vector<int64_t>{256, 8224}));
  EXPECT_EQ(embd->n_bytes, 256 * 8224 * 4);
  EXPECT_EQ(f->find_tensor("no.such.tensor"), nullptr);
  // Tensor data lies inside the file and is aligned.
  for (const TensorInfo& t : f->tensors()) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 32, 0u) << t.name;
  }
}

TEST(GgufFileTest, TypedGettersNameKeyAndTypes) {
  auto f = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(f.has_value());
  auto wrong = f->get_u32("general.architecture");
  ASSERT_FALSE(wrong.has_value());
  EXPECT_EQ(wrong.status().message(), "key general.architecture: expected u32, found string");
  auto missing = f->get_u32("qwen2.nothing");
  EXPECT_EQ(missing.status().message(), "key qwen2.nothing: missing");
  EXPECT_EQ(f->get_u32_or("qwen2.nothing", 7).value(), 7u);
  auto arr = f->get_string("tokenizer.ggml.tokens");
  EXPECT_EQ(arr.status().message(),
            "key tokenizer.ggml.tokens: expected string, found array of string");
}

TEST(GgufFileTest, OpensEveryQuantizedTinyModel) {
  for (const char* type : {"F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M",
                           "Q4_K_M", "Q5_K_M", "Q6_K"}) {
    auto f = GgufFile::open(kModels + "tiny-" + type + ".gguf");
    ASSERT_TRUE(f.has_value()) << type << ": " << f.status().message();
    EXPECT_EQ(f->tensors().size(), 2u * 12 + 3) << type;
  }
}

TEST(GgufFileTest, MissingFileIsAClearError) {
  auto f = GgufFile::open("/nonexistent/model.gguf");
  ASSERT_FALSE(f.has_value());
  EXPECT_NE(f.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace ponder
