#include "quant/quant_mix.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/model_quantizer.h"

namespace ponder {
namespace {

const std::string kModels = std::string(PONDER_SHARED_DIR) + "/models/";

// DeepSeek-R1-Distill-Qwen-1.5B: 28 layers, 12 query heads over 2 KV heads.
const MixModelInfo k1_5B{28, 6, true};
const std::vector<int64_t> kMatrix{1536, 1536};
const std::vector<int64_t> kFfnDown{8960, 1536};
const std::vector<int64_t> kVector{1536};

GgmlType pick(QuantMix mix, const MixModelInfo& model, const std::string& name,
              const std::vector<int64_t>& shape, GgmlType current = GgmlType::F32) {
  return choose_tensor_type(mix, model, name, shape, current).type;
}

std::string blk(int layer, const char* what) { return "blk." + std::to_string(layer) + "." + what; }

// The layers llama.cpp's use_more_bits picks for 28 layers, written out by hand from
// i < 28/8 || i >= 7*28/8 || (i - 28/8) % 3 == 2, i.e. i < 3 || i >= 24 || (i - 3) % 3 == 2.
const std::set<int> kMoreBits28 = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};

TEST(QuantMix, UseMoreBitsFor28Layers) {
  for (int i = 0; i < 28; ++i) EXPECT_EQ(use_more_bits(i, 28), kMoreBits28.count(i) == 1) << i;
  // 2 layers (the tiny model): only the last one.
  EXPECT_FALSE(use_more_bits(0, 2));
  EXPECT_TRUE(use_more_bits(1, 2));
}

TEST(QuantMix, Q4KMOn28Layers) {
  for (int i = 0; i < 28; ++i) {
    const GgmlType more = kMoreBits28.count(i) ? GgmlType::Q6_K : GgmlType::Q4_K;
    EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, blk(i, "attn_v.weight"), {1536, 256}), more) << i;
    EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, blk(i, "ffn_down.weight"), kFfnDown), more) << i;
    for (const char* w : {"attn_q.weight", "attn_k.weight", "attn_output.weight", "ffn_gate.weight",
                          "ffn_up.weight"}) {
      EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, blk(i, w), kMatrix), GgmlType::Q4_K) << i << w;
    }
    for (const char* w :
         {"attn_norm.weight", "ffn_norm.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias"}) {
      EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, blk(i, w), kVector), GgmlType::F32) << i << w;
    }
  }
  EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, "output.weight", {1536, 151936}), GgmlType::Q6_K);
  EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, "token_embd.weight", {1536, 151936}), GgmlType::Q4_K);
  EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, "output_norm.weight", kVector), GgmlType::F32);
}

TEST(QuantMix, Q5KMOn28Layers) {
  for (int i = 0; i < 28; ++i) {
    const GgmlType more = kMoreBits28.count(i) ? GgmlType::Q6_K : GgmlType::Q5_K;
    EXPECT_EQ(pick(QuantMix::Q5_K_M, k1_5B, blk(i, "attn_v.weight"), {1536, 256}), more) << i;
    EXPECT_EQ(pick(QuantMix::Q5_K_M, k1_5B, blk(i, "ffn_down.weight"), kFfnDown), more) << i;
    EXPECT_EQ(pick(QuantMix::Q5_K_M, k1_5B, blk(i, "attn_output.weight"), kMatrix), GgmlType::Q5_K);
  }
  EXPECT_EQ(pick(QuantMix::Q5_K_M, k1_5B, "output.weight", {1536, 151936}), GgmlType::Q6_K);
}

TEST(QuantMix, Q3KAndQ4KSOn28Layers) {
  for (int i = 0; i < 28; ++i) {
    // Q3_K_M: the first two attn_v and the first 28/16 = 1 ffn_down get Q5_K, the rest Q4_K;
    // attn_output Q4_K.
    EXPECT_EQ(pick(QuantMix::Q3_K_M, k1_5B, blk(i, "attn_v.weight"), {1536, 256}),
              i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K);
    EXPECT_EQ(pick(QuantMix::Q3_K_M, k1_5B, blk(i, "ffn_down.weight"), kFfnDown),
              i < 1 ? GgmlType::Q5_K : GgmlType::Q4_K);
    EXPECT_EQ(pick(QuantMix::Q3_K_M, k1_5B, blk(i, "attn_output.weight"), kMatrix), GgmlType::Q4_K);
    EXPECT_EQ(pick(QuantMix::Q3_K_M, k1_5B, blk(i, "ffn_up.weight"), kMatrix), GgmlType::Q3_K);
    // Q3_K_L: attn_v, ffn_down and attn_output Q5_K.
    for (const char* w : {"attn_v.weight", "ffn_down.weight", "attn_output.weight"}) {
      EXPECT_EQ(pick(QuantMix::Q3_K_L, k1_5B, blk(i, w), kMatrix), GgmlType::Q5_K);
    }
    // Q3_K_S: no promotions.
    EXPECT_EQ(pick(QuantMix::Q3_K_S, k1_5B, blk(i, "attn_v.weight"), kMatrix), GgmlType::Q3_K);
    // Q4_K_S: the first four attn_v and the first 28/8 = 3 ffn_down get Q5_K.
    EXPECT_EQ(pick(QuantMix::Q4_K_S, k1_5B, blk(i, "attn_v.weight"), kMatrix),
              i < 4 ? GgmlType::Q5_K : GgmlType::Q4_K);
    EXPECT_EQ(pick(QuantMix::Q4_K_S, k1_5B, blk(i, "ffn_down.weight"), kFfnDown),
              i < 3 ? GgmlType::Q5_K : GgmlType::Q4_K);
    // Q2_K: attn_v Q4_K (6 query heads per KV head), ffn_down and attn_output Q3_K.
    EXPECT_EQ(pick(QuantMix::Q2_K, k1_5B, blk(i, "attn_v.weight"), kMatrix), GgmlType::Q4_K);
    EXPECT_EQ(pick(QuantMix::Q2_K, k1_5B, blk(i, "ffn_down.weight"), kFfnDown), GgmlType::Q3_K);
    EXPECT_EQ(pick(QuantMix::Q2_K, k1_5B, blk(i, "attn_output.weight"), kMatrix), GgmlType::Q3_K);
    EXPECT_EQ(pick(QuantMix::Q2_K, k1_5B, blk(i, "attn_q.weight"), kMatrix), GgmlType::Q2_K);
  }
  MixModelInfo mha = k1_5B;
  mha.n_gqa = 2;
  EXPECT_EQ(pick(QuantMix::Q2_K, mha, blk(0, "attn_v.weight"), kMatrix), GgmlType::Q3_K);
}

TEST(QuantMix, LegacyAndFloatMixes) {
  for (QuantMix mix : {QuantMix::Q4_0, QuantMix::Q4_1, QuantMix::Q5_0, QuantMix::Q5_1}) {
    EXPECT_EQ(pick(mix, k1_5B, blk(5, "ffn_down.weight"), kFfnDown), quant_mix_default_type(mix));
    EXPECT_EQ(pick(mix, k1_5B, "output.weight", kMatrix), GgmlType::Q6_K);
  }
  EXPECT_EQ(pick(QuantMix::Q8_0, k1_5B, "output.weight", kMatrix), GgmlType::Q8_0);
  EXPECT_EQ(pick(QuantMix::Q6_K, k1_5B, blk(0, "attn_v.weight"), kMatrix), GgmlType::Q6_K);
  for (QuantMix mix : {QuantMix::F16, QuantMix::BF16, QuantMix::F32}) {
    EXPECT_EQ(pick(mix, k1_5B, "output.weight", kMatrix), quant_mix_default_type(mix));
    EXPECT_EQ(pick(mix, k1_5B, blk(0, "attn_v.weight"), kMatrix, GgmlType::BF16),
              quant_mix_default_type(mix));
    EXPECT_EQ(pick(mix, k1_5B, blk(0, "attn_norm.weight"), kVector), GgmlType::F32);
  }
}

TEST(QuantMix, TiedEmbeddingsGetTheOutputType) {
  MixModelInfo tied = k1_5B;
  tied.has_output = false;
  EXPECT_EQ(pick(QuantMix::Q4_K_M, tied, "token_embd.weight", {1536, 151936}), GgmlType::Q6_K);
  EXPECT_EQ(pick(QuantMix::Q8_0, tied, "token_embd.weight", {1536, 151936}), GgmlType::Q8_0);
}

TEST(QuantMix, FallbackWhenTheRowDoesNotFit) {
  const std::vector<int64_t> odd{544, 64};  // 17 * 32: not a multiple of 256
  auto choice =
      choose_tensor_type(QuantMix::Q4_K_M, k1_5B, blk(3, "attn_q.weight"), odd, GgmlType::F32);
  EXPECT_EQ(choice.type, GgmlType::Q5_0);
  EXPECT_TRUE(choice.fallback);
  EXPECT_EQ(pick(QuantMix::Q5_K_S, k1_5B, blk(3, "attn_q.weight"), odd), GgmlType::Q5_1);
  EXPECT_EQ(pick(QuantMix::Q2_K, k1_5B, blk(3, "attn_q.weight"), odd), GgmlType::Q4_0);
  EXPECT_EQ(pick(QuantMix::Q3_K_S, k1_5B, blk(3, "attn_q.weight"), odd), GgmlType::Q4_0);
  EXPECT_EQ(pick(QuantMix::Q6_K, k1_5B, blk(3, "attn_q.weight"), odd), GgmlType::Q8_0);
  EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, blk(0, "ffn_down.weight"), odd), GgmlType::Q8_0);  // Q6_K
  EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, "output.weight", odd), GgmlType::Q8_0);
  EXPECT_EQ(pick(QuantMix::Q4_K_M, k1_5B, blk(3, "attn_q.weight"), {100, 64}), GgmlType::F16);
  EXPECT_FALSE(
      choose_tensor_type(QuantMix::Q4_K_M, k1_5B, blk(3, "attn_q.weight"), kMatrix, GgmlType::F32)
          .fallback);
}

TEST(QuantMix, NamesAndFileTypes) {
  EXPECT_EQ(quant_mix_from_name("q4_k_m"), QuantMix::Q4_K_M);
  EXPECT_EQ(quant_mix_from_name("Q8_0"), QuantMix::Q8_0);
  EXPECT_EQ(quant_mix_from_name("bf16"), QuantMix::BF16);
  EXPECT_FALSE(quant_mix_from_name("Q4_K"));
  EXPECT_FALSE(quant_mix_from_name("IQ2_XXS"));
  EXPECT_EQ(all_quant_mixes().size(), 17u);
  for (QuantMix m : all_quant_mixes()) EXPECT_EQ(quant_mix_from_name(quant_mix_name(m)), m);
  // LLAMA_FTYPE_* of llama.h.
  EXPECT_EQ(quant_mix_file_type(QuantMix::F32), 0u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::F16), 1u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q4_0), 2u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q4_1), 3u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q8_0), 7u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q5_0), 8u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q5_1), 9u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q2_K), 10u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q3_K_S), 11u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q3_K_M), 12u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q3_K_L), 13u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q4_K_S), 14u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q4_K_M), 15u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q5_K_S), 16u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q5_K_M), 17u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::Q6_K), 18u);
  EXPECT_EQ(quant_mix_file_type(QuantMix::BF16), 32u);
}

// The shared tiny-<MIX>.gguf files were made by llama-quantize from tiny-F32.gguf: for every
// tensor our choice on tiny-F32 must be the type llama.cpp chose, and the file type its ftype.
class TinyMixTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyMixTest, SameTypesAsLlamaQuantize) {
  auto f32 = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(f32) << f32.status().message();
  auto theirs = GgufFile::open(kModels + "tiny-" + GetParam() + ".gguf");
  ASSERT_TRUE(theirs) << theirs.status().message();
  const auto mix = quant_mix_from_name(GetParam());
  ASSERT_TRUE(mix);
  auto model = ModelQuantizer::model_info(*f32);
  ASSERT_TRUE(model) << model.status().message();
  EXPECT_EQ(model->n_layer, 2);
  for (const TensorInfo& t : f32->tensors()) {
    const TensorInfo* ref = theirs->find_tensor(t.name);
    ASSERT_NE(ref, nullptr) << t.name;
    EXPECT_EQ(choose_tensor_type(*mix, *model, t.name, t.shape, t.type).type, ref->type)
        << GetParam() << " " << t.name << ": ours "
        << ggml_type_name(choose_tensor_type(*mix, *model, t.name, t.shape, t.type).type)
        << ", llama.cpp " << ggml_type_name(ref->type);
  }
  auto file_type = theirs->get_u32("general.file_type");
  ASSERT_TRUE(file_type);
  EXPECT_EQ(*file_type, quant_mix_file_type(*mix));
}

INSTANTIATE_TEST_SUITE_P(Files, TinyMixTest,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ponder
