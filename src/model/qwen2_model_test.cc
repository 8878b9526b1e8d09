#include "model/qwen2_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>

#include "cpu/cpu_features.h"
#include "kernels/block_attention.h"
#include "quant/half.h"

namespace ponder {
namespace {

const std::string kModels = std::string(PONDER_SHARED_DIR) + "/models/";

struct Loaded {
  GgufFile file;
  std::unique_ptr<Qwen2Model> model;
};

Loaded load(const std::string& type) {
  auto file = GgufFile::open(kModels + "tiny-" + type + ".gguf");
  EXPECT_TRUE(file.has_value());
  Loaded l{std::move(*file), nullptr};
  auto model = Qwen2Model::load(l.file);
  EXPECT_TRUE(model.has_value()) << model.status().message();
  l.model = std::move(*model);
  return l;
}

TEST(Qwen2ModelTest, ReadsTheTinyConfig) {
  Loaded l = load("F32");
  const Qwen2Config& c = l.model->config();
  EXPECT_EQ(c.n_vocab, 8224);
  EXPECT_EQ(c.n_embd, 256);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.n_head_kv, 2);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_ff, 768);
  EXPECT_FALSE(l.model->weights().tied_output);
}

// The block order's bf16 scores: the default for quantized weights where the CPU runs them
// natively, never for F32 / F16 / BF16 weights, and not with a Q8_0 K cache, which takes int8
// scores where AVX512_VNNI runs them (numerics() names what runs).
// ... and with them a bf16 KV cache (the tiny models' head size, 64, suits its kernel), which an
// explicit f16 cache, f32 scores or llama.cpp's order turn back to f16. Native on an AMD CPU
// (bf16_attention_choice.h), or forced by PONDER_BF16_ATTN (run both ways by CMake).
TEST(Qwen2ModelTest, Bf16ScoresAndCacheAreTheDefaultForQuantizedWeightsWhereNative) {
  const bool has_bf16 = block_attention_kernels().attend_block_bf16_group != nullptr;
  ASSERT_EQ(has_bf16, block_attention_kernels().attend_block_bf16kv_group != nullptr);
  const bool int8 = block_attention_kernels().attend_block_q8_0_i8_group != nullptr;
  for (const char* type : {"Q4_K_M", "Q8_0", "Q2_K"}) {
    Loaded l = load(type);
    const Bf16AttentionChoice choice = l.model->bf16_attention_choice();
    if (std::getenv("PONDER_BF16_ATTN") == nullptr) {
      EXPECT_EQ(choice.bf16, has_bf16 && cpu_features().vendor == "AuthenticAMD") << choice.why;
    }
    if (!has_bf16) {
      EXPECT_FALSE(choice.bf16);
    }
    const bool native = choice.bf16;
    EXPECT_EQ(l.model->bf16_scores(), native) << type;
    EXPECT_EQ(l.model->numerics(), native ? "block-bf16kv bf16/bf16" : "block f16/f16") << type;
    EXPECT_EQ(l.model->make_cache(1, 16).k_type(), native ? KvType::kBF16 : KvType::kF16) << type;
    ASSERT_TRUE(l.model->set_kv_types(KvType::kF16, KvType::kF16).is_ok());
    EXPECT_EQ(l.model->numerics(), native ? "block-bf16qk f16/f16" : "block f16/f16") << type;
    ASSERT_TRUE(l.model->set_kv_types(KvType::kQ8_0, KvType::kQ8_0).is_ok());
    EXPECT_EQ(l.model->numerics(), int8 ? "block-i8qk-i16v q8_0/q8_0" : "block q8_0/q8_0") << type;
    l.model->set_int8_scores(false);
    EXPECT_EQ(l.model->numerics(), "block q8_0/q8_0") << type;
    l.model->set_int8_scores(int8);
    EXPECT_FALSE(l.model->set_kv_types(KvType::kBF16, KvType::kF16).is_ok()) << type;
    l.model->use_default_kv_types();
    l.model->set_bf16_scores(false);
    EXPECT_EQ(l.model->numerics(), "block f16/f16") << type;
    l.model->set_bf16_scores(native);
    l.model->set_flash_attention(false);
    EXPECT_EQ(l.model->numerics(), "ggml f16/f16") << type;
  }
  for (const char* type : {"F32", "F16", "BF16"}) {
    Loaded l = load(type);
    EXPECT_FALSE(l.model->bf16_scores()) << type;
    EXPECT_EQ(l.model->numerics(), "block f16/f16") << type;
  }
}

// Several sequences in one batch give the same logits as each alone, and a prompt fed in chunks
// (the KV cache carrying the prefix) gives the same logits as fed whole.
TEST(Qwen2ModelTest, BatchedSequencesMatchEachAlone) {
  for (const char* type : {"Q4_K_M", "F16", "Q4_0", "BF16"}) {
    SCOPED_TRACE(type);
    Loaded l = load(type);
    Qwen2Model& m = *l.model;
    ThreadPool pool(2);
    const int64_t V = m.config().n_vocab;
    const std::vector<std::vector<int32_t>> prompts = {
        {151646 % 8224, 100, 200, 300, 400, 500, 600},
        {7, 8, 9},
        {42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60}};
    const int64_t bs = 4;

    // Alone: each sequence in its own cache, fed token by token (decode style).
    std::vector<std::vector<float>> alone;
    for (const auto& p : prompts) {
      KvCache cache = m.make_cache(8, bs);
      std::vector<int32_t> blocks = {5, 2, 7, 0, 1};  // any order of blocks works
      std::vector<float> last(V);
      for (size_t i = 0; i < p.size(); ++i) {
        Batch b;
        b.block_tables.push_back(blocks);
        b.rows.push_back({p[i], static_cast<int32_t>(i), 0, true});
        ASSERT_TRUE(m.forward(b, cache, last.data(), pool).is_ok());
      }
      alone.push_back(last);
    }

    // Together: all three sequences, whole prompts, one batch, one shared cache.
    KvCache cache = m.make_cache(16, bs);
    std::vector<std::vector<int32_t>> tables = {{0, 1}, {2}, {3, 4, 5, 6, 7}};
    Batch b;
    for (const auto& t : tables) b.block_tables.push_back(t);
    for (size_t s = 0; s < prompts.size(); ++s) {
      for (size_t i = 0; i < prompts[s].size(); ++i) {
        b.rows.push_back({prompts[s][i], static_cast<int32_t>(i), static_cast<int32_t>(s),
                          i + 1 == prompts[s].size()});
      }
    }
    std::vector<float> logits(3 * V);
    ASSERT_TRUE(m.forward(b, cache, logits.data(), pool).is_ok());
    for (size_t s = 0; s < prompts.size(); ++s) {
      double max_diff = 0;
      for (int64_t i = 0; i < V; ++i)
        max_diff = std::max(max_diff, double(std::fabs(logits[s * V + i] - alone[s][i])));
      EXPECT_EQ(max_diff, 0.0) << "sequence " << s;  // batch invariance: bit for bit
    }
  }
}

// Context shift: layer 0's keys computed at positions p and rotated by +d equal the keys computed
// at positions p + d, up to f16 rounding (layer 0's keys depend on the token and the position only;
// deeper layers' would need the same context before them), and rotating back by -d returns the
// first keys in every layer.
TEST(Qwen2ModelTest, RotatedKeysEqualKeysComputedAtTheNewPositions) {
  Loaded l = load("F32");
  Qwen2Model& m = *l.model;
  const Qwen2Config& c = m.config();
  ThreadPool pool(2);
  const int64_t bs = 16, d = 32;
  const std::vector<int32_t> tokens = {11, 290, 3011, 45, 77, 1204, 5, 906, 18, 2400, 33, 64};
  KvCache cache = m.make_cache(8, bs);
  std::vector<float> logits(static_cast<size_t>(c.n_vocab));
  auto run = [&](const std::vector<int32_t>& table, int32_t first_pos) {
    Batch b;
    b.block_tables.emplace_back(table);
    for (size_t i = 0; i < tokens.size(); ++i)
      b.rows.push_back({tokens[i], first_pos + static_cast<int32_t>(i), 0, i + 1 == tokens.size()});
    ASSERT_TRUE(m.forward(b, cache, logits.data(), pool).is_ok());
  };
  const std::vector<int32_t> at0 = {0};
  const std::vector<int32_t> at_d = {6, 7, 1};  // positions 32.. live in table index 2: block 1
  run(at0, 0);
  run(at_d, static_cast<int32_t>(d));
  // Layer l's keys of block 0, head by head: [n_head_kv][tokens][head_dim].
  auto keys = [&](int64_t layer, int64_t block) {
    std::vector<uint16_t> k;
    for (int64_t h = 0; h < c.n_head_kv; ++h) {
      const uint16_t* head = cache.k(layer, block, h, 0);
      k.insert(k.end(), head, head + tokens.size() * c.head_dim);
    }
    return k;
  };
  std::vector<std::vector<uint16_t>> before;
  for (int64_t layer = 0; layer < c.n_layer; ++layer) before.push_back(keys(layer, 0));
  m.rotate_keys(cache, 0, static_cast<int64_t>(tokens.size()), static_cast<int32_t>(d));
  {
    const int64_t layer = 0;
    double max_diff = 0, max_abs = 0;
    const std::vector<uint16_t> rotated = keys(layer, 0), fresh = keys(layer, 1);
    for (size_t i = 0; i < rotated.size(); ++i) {
      const float a = fp16_to_fp32(rotated[i]);
      const float b = fp16_to_fp32(fresh[i]);
      max_diff = std::max(max_diff, static_cast<double>(std::fabs(a - b)));
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(b)));
    }
    EXPECT_LT(max_diff, 2e-3 * std::max(1.0, max_abs));
  }
  m.rotate_keys(cache, 0, static_cast<int64_t>(tokens.size()), -static_cast<int32_t>(d));
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    double back = 0, max_abs = 0;
    const std::vector<uint16_t>& b = before[static_cast<size_t>(layer)];
    const std::vector<uint16_t> now = keys(layer, 0);
    for (size_t i = 0; i < b.size(); ++i) {
      back =
          std::max(back, static_cast<double>(std::fabs(fp16_to_fp32(now[i]) - fp16_to_fp32(b[i]))));
      max_abs = std::max(max_abs, static_cast<double>(std::fabs(fp16_to_fp32(b[i]))));
    }
    EXPECT_LT(back, 2e-3 * std::max(1.0, max_abs)) << "layer " << layer;
  }
}

TEST(Qwen2ModelTest, BadRowsAreErrors) {
  Loaded l = load("Q8_0");
  ThreadPool pool(1);
  KvCache cache = l.model->make_cache(2, 4);
  std::vector<int32_t> blocks = {0};
  std::vector<float> logits(l.model->config().n_vocab);
  Batch b;
  b.block_tables.push_back(blocks);
  b.rows.push_back({9000, 0, 0, true});
  EXPECT_NE(
      l.model->forward(b, cache, logits.data(), pool).message().find("outside the vocabulary"),
      std::string::npos);
  b.rows[0] = {1, 4, 0, true};
  EXPECT_NE(l.model->forward(b, cache, logits.data(), pool).message().find("has no KV block"),
            std::string::npos);
  b.rows[0] = {1, 0, 3, true};
  EXPECT_NE(l.model->forward(b, cache, logits.data(), pool).message().find("no block table"),
            std::string::npos);
}

TEST(Qwen2ModelTest, WrongShapeNamesTheTensor) {
  // The vocab-only GGUF has no tensors at all.
  auto file = GgufFile::open(kModels + "vocab-r1-qwen.gguf");
  ASSERT_TRUE(file.has_value());
  auto model = Qwen2Model::load(*file);
  ASSERT_FALSE(model.has_value());
  EXPECT_NE(model.status().message().find("token_embd.weight"), std::string::npos)
      << model.status().message();
}

}  // namespace
}  // namespace ponder
