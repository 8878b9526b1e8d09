#include "synth/synth_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "quant/half.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

const std::string kShared = PONDER_SHARED_DIR;
const std::string kTinyF32 = kShared + "/models/tiny-F32.gguf";
const std::string kTinyF16 = kShared + "/models/tiny-F16.gguf";
const std::string kVocab = kShared + "/models/vocab-r1-qwen.gguf";

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "ponder_synth_" + std::to_string(getpid()) + "_" + name;
}

std::vector<char> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

const GgufValue* find_key(const SynthPlan& plan, const std::string& key) {
  for (const auto& [k, v] : plan.metadata) {
    if (k == key) return &v;
  }
  return nullptr;
}

uint32_t plan_u32(const SynthPlan& plan, const std::string& key) {
  const GgufValue* v = find_key(plan, key);
  EXPECT_NE(v, nullptr) << key;
  return v ? v->as<uint32_t>() : 0;
}

float plan_f32(const SynthPlan& plan, const std::string& key) {
  const GgufValue* v = find_key(plan, key);
  EXPECT_NE(v, nullptr) << key;
  return v ? v->as<float>() : 0;
}

SynthPlan plan_or_die(const char* preset, GgmlType type) {
  const SynthPreset* p = find_synth_preset(preset);
  EXPECT_NE(p, nullptr) << preset;
  auto plan = plan_synth_model(*p, type);
  EXPECT_TRUE(plan.has_value()) << plan.status().message();
  return std::move(plan).value();
}

Status write_tiny(const std::string& path, GgmlType type, uint64_t seed, int n_threads) {
  SynthOptions options;
  options.preset = find_synth_preset("tiny");
  options.output_path = path;
  options.vocab_path = kTinyF32;
  options.type = type;
  options.seed = seed;
  options.n_threads = n_threads;
  return write_synth_model(options);
}

struct PresetCase {
  const char* name;
  uint32_t n_embd, n_ff, n_layer, n_head, n_head_kv, n_ctx;
  int64_t n_vocab;
  float rope_theta, rms_eps;
  int64_t n_params;
};

TEST(SynthPlan, HyperparametersOfEveryPreset) {
  // The config.json values of deepseek-ai/DeepSeek-R1-Distill-Qwen-*, parameter counts with the
  // untied output matrix.
  const PresetCase cases[] = {
      {"tiny", 256, 768, 2, 4, 2, 4096, 8224, 1e4f, 1e-6f, 0},
      {"1.5b", 1536, 8960, 28, 12, 2, 131072, 151936, 1e4f, 1e-6f, 1777088000},
      {"7b", 3584, 18944, 28, 28, 4, 131072, 152064, 1e4f, 1e-6f, 7615616512},
      {"14b", 5120, 13824, 48, 40, 8, 131072, 152064, 1e6f, 1e-5f, 14770033664},
      {"32b", 5120, 27648, 64, 40, 8, 131072, 152064, 1e6f, 1e-5f, 32763876352},
  };
  for (const PresetCase& c : cases) {
    SCOPED_TRACE(c.name);
    const SynthPlan plan = plan_or_die(c.name, GgmlType::F16);
    EXPECT_EQ(find_key(plan, "general.architecture")->as_string(), "qwen2");
    EXPECT_EQ(find_key(plan, "general.name")->as_string(),
              std::string("synthetic-r1-distill-qwen-") + c.name);
    EXPECT_EQ(plan_u32(plan, "general.file_type"), 1u);
    EXPECT_EQ(plan_u32(plan, "general.quantization_version"), 2u);
    EXPECT_EQ(plan_u32(plan, "qwen2.embedding_length"), c.n_embd);
    EXPECT_EQ(plan_u32(plan, "qwen2.feed_forward_length"), c.n_ff);
    EXPECT_EQ(plan_u32(plan, "qwen2.block_count"), c.n_layer);
    EXPECT_EQ(plan_u32(plan, "qwen2.attention.head_count"), c.n_head);
    EXPECT_EQ(plan_u32(plan, "qwen2.attention.head_count_kv"), c.n_head_kv);
    EXPECT_EQ(plan_u32(plan, "qwen2.context_length"), c.n_ctx);
    EXPECT_EQ(plan_f32(plan, "qwen2.rope.freq_base"), c.rope_theta);
    EXPECT_EQ(plan_f32(plan, "qwen2.attention.layer_norm_rms_epsilon"), c.rms_eps);

    ASSERT_EQ(plan.tensors.size(), 3 + 12 * size_t{c.n_layer});
    EXPECT_EQ(plan.tensors[0].name, "token_embd.weight");
    EXPECT_EQ(plan.tensors[0].shape, (std::vector<int64_t>{c.n_embd, c.n_vocab}));
    EXPECT_EQ(plan.tensors[2].name, "output.weight");
    EXPECT_EQ(plan.tensors[2].shape, (std::vector<int64_t>{c.n_embd, c.n_vocab}));
    const int64_t n_embd_kv = int64_t{c.n_embd} / c.n_head * c.n_head_kv;
    const SynthTensor& k = plan.tensors[3 + 3];  // blk.0.attn_k.weight
    EXPECT_EQ(k.name, "blk.0.attn_k.weight");
    EXPECT_EQ(k.shape, (std::vector<int64_t>{c.n_embd, n_embd_kv}));
    const SynthTensor& down = plan.tensors.back();
    EXPECT_EQ(down.name, "blk." + std::to_string(c.n_layer - 1) + ".ffn_down.weight");
    EXPECT_EQ(down.shape, (std::vector<int64_t>{c.n_ff, c.n_embd}));
    EXPECT_EQ(c.n_embd / c.n_head, c.n_embd == 256 ? 64u : 128u);  // head_dim
    if (c.n_params) {
      EXPECT_EQ(plan.n_params(), c.n_params);
    }
    for (const SynthTensor& t : plan.tensors) {
      EXPECT_EQ(t.type, t.shape.size() == 1 ? GgmlType::F32 : GgmlType::F16) << t.name;
    }
  }
}

TEST(SynthPlan, OneAndAHalfBillionF16Size) {
  const SynthPlan plan = plan_or_die("1.5b", GgmlType::F16);
  // Vectors (norms, biases) stay F32: 28 * (3 * 1536 + 2 * 256) + 1536 of them.
  const int64_t n_vec = 28 * (3 * 1536 + 2 * 256) + 1536;
  EXPECT_EQ(plan.n_bytes(), (plan.n_params() - n_vec) * 2 + n_vec * 4);
}

TEST(SynthPlan, TinyMatchesTheSharedTinyModel) {
  auto file = GgufFile::open(kTinyF32);
  ASSERT_TRUE(file.has_value()) << file.status().message();
  const SynthPlan plan = plan_or_die("tiny", GgmlType::F32);
  ASSERT_EQ(plan.tensors.size(), file->tensors().size());
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    EXPECT_EQ(plan.tensors[i].name, file->tensors()[i].name);
    EXPECT_EQ(plan.tensors[i].shape, file->tensors()[i].shape) << plan.tensors[i].name;
    EXPECT_EQ(plan.tensors[i].type, file->tensors()[i].type) << plan.tensors[i].name;
  }
  // Every non-tokenizer key of the F32 file, in the same order and with the same value (the name
  // included: both are "synthetic-r1-distill-qwen-tiny").
  std::vector<std::pair<std::string, GgufValue>> model_keys;
  for (const auto& kv : file->metadata()) {
    if (kv.first.rfind("tokenizer.", 0) != 0) model_keys.push_back(kv);
  }
  ASSERT_EQ(plan.metadata.size(), model_keys.size());
  for (size_t i = 0; i < model_keys.size(); ++i) {
    EXPECT_EQ(plan.metadata[i].first, model_keys[i].first);
    EXPECT_TRUE(plan.metadata[i].second == model_keys[i].second)
        << model_keys[i].first << ": " << plan.metadata[i].second.describe() << " vs "
        << model_keys[i].second.describe();
  }
}

TEST(SynthPlan, TinyF16TypesMatchLlamaCppsF16) {
  auto file = GgufFile::open(kTinyF16);
  ASSERT_TRUE(file.has_value()) << file.status().message();
  const SynthPlan plan = plan_or_die("tiny", GgmlType::F16);
  ASSERT_EQ(plan.tensors.size(), file->tensors().size());
  for (const SynthTensor& t : plan.tensors) {
    const TensorInfo* info = file->find_tensor(t.name);
    ASSERT_NE(info, nullptr) << t.name;
    EXPECT_EQ(t.type, info->type) << t.name;
    EXPECT_EQ(t.shape, info->shape) << t.name;
  }
  EXPECT_EQ(plan_u32(plan, "general.file_type"), file->get_u32("general.file_type").value());
}

TEST(SynthPlan, RejectsTypesThatCannotHoldWeights) {
  const SynthPreset* p = find_synth_preset("tiny");
  EXPECT_FALSE(plan_synth_model(*p, GgmlType::Q8_K).has_value());
  EXPECT_FALSE(plan_synth_model(*p, GgmlType::Q8_1).has_value());
  EXPECT_EQ(find_synth_preset("3b"), nullptr);
}

TEST(SynthTokenizer, PadsTheVocabularyLikeTheConverter) {
  auto vocab = GgufFile::open(kVocab);
  ASSERT_TRUE(vocab.has_value()) << vocab.status().message();
  const int64_t n_file =
      static_cast<int64_t>(vocab->get_string_array("tokenizer.ggml.tokens").value()->size());
  ASSERT_EQ(n_file, 151936);

  auto same = synth_tokenizer_metadata(*vocab, 151936);
  ASSERT_TRUE(same.has_value()) << same.status().message();
  size_t n_tokenizer_keys = 0;
  for (const auto& kv : vocab->metadata()) n_tokenizer_keys += kv.first.rfind("tokenizer.", 0) == 0;
  ASSERT_EQ(same->size(), n_tokenizer_keys);
  for (const auto& [key, value] : *same) EXPECT_TRUE(value == *vocab->find(key)) << key;

  auto padded = synth_tokenizer_metadata(*vocab, 152064);  // the 7B/14B/32B embedding size
  ASSERT_TRUE(padded.has_value()) << padded.status().message();
  std::map<std::string, const GgufValue*> by_key;
  for (const auto& [key, value] : *padded) by_key[key] = &value;
  const auto& tokens = by_key.at("tokenizer.ggml.tokens")->strings();
  ASSERT_EQ(tokens.size(), 152064u);
  EXPECT_EQ(tokens[151935], vocab->get_string_array("tokenizer.ggml.tokens").value()->back());
  EXPECT_EQ(tokens[151936], "[PAD151936]");
  EXPECT_EQ(tokens[152063], "[PAD152063]");
  const GgufValue* types = by_key.at("tokenizer.ggml.token_type");
  ASSERT_EQ(types->array_size(), 152064u);
  EXPECT_EQ(types->raw_at<int32_t>(152063), 5);  // UNUSED, like the file's own padding
  EXPECT_EQ(types->raw_at<int32_t>(151935),
            vocab->get_i32_array("tokenizer.ggml.token_type").value().back());
  EXPECT_TRUE(*by_key.at("tokenizer.ggml.merges") == *vocab->find("tokenizer.ggml.merges"));
  EXPECT_TRUE(*by_key.at("tokenizer.chat_template") == *vocab->find("tokenizer.chat_template"));

  auto too_small = synth_tokenizer_metadata(*vocab, 8224);
  ASSERT_FALSE(too_small.has_value());
  EXPECT_NE(too_small.status().message().find("151936"), std::string::npos);
}

TEST(SynthWeights, RowsDoNotDependOnHowTheyAreSplit) {
  const SynthPlan plan = plan_or_die("tiny", GgmlType::F32);
  const SynthTensor& t = plan.tensors[0];  // token_embd: [256, 8224]
  const int64_t rows = 40;
  std::vector<float> scratch(t.shape[0]);
  std::vector<float> whole(rows * t.shape[0]), parts(rows * t.shape[0]);
  synth_fill_rows(t, 7, 0, rows, scratch.data(), reinterpret_cast<uint8_t*>(whole.data()));
  for (int64_t r = 0; r < rows; r += 3) {
    const int64_t n = std::min<int64_t>(3, rows - r);
    synth_fill_rows(t, 7, r, n, scratch.data(),
                    reinterpret_cast<uint8_t*>(parts.data() + r * t.shape[0]));
  }
  EXPECT_EQ(whole, parts);
}

TEST(SynthWeights, F16RowsAreTheRoundedF32Rows) {
  // The F16 path may use F16C; it must round exactly like the scalar reference in quant/half.h.
  SynthTensor t32{"blk.0.ffn_up.weight", GgmlType::F32, {256, 64}, {0.0f, 1e-4f}};
  SynthTensor t16 = t32;
  t16.type = GgmlType::F16;
  std::vector<float> scratch(256), x(256 * 64);
  std::vector<uint16_t> h(256 * 64);
  synth_fill_rows(t32, 9, 0, 64, scratch.data(), reinterpret_cast<uint8_t*>(x.data()));
  synth_fill_rows(t16, 9, 0, 64, scratch.data(), reinterpret_cast<uint8_t*>(h.data()));
  int n_subnormal = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(h[i], fp32_to_fp16(x[i])) << i << ": " << x[i];
    n_subnormal += (h[i] & 0x7C00) == 0 && (h[i] & 0x3FF) != 0;
  }
  EXPECT_GT(n_subnormal, 100);  // the small scale exercises subnormal rounding too
}

TEST(SynthWeights, DistributionsHaveTheirScales) {
  const SynthPlan plan = plan_or_die("tiny", GgmlType::F32);
  for (const SynthTensor& t : plan.tensors) {
    const int64_t n = t.n_elements();
    std::vector<float> scratch(t.shape[0]), values(n);
    synth_fill_rows(t, 1, 0, n / t.shape[0], scratch.data(),
                    reinterpret_cast<uint8_t*>(values.data()));
    double sum = 0, sum2 = 0;
    for (float v : values) sum += v, sum2 += double{v} * v;
    const double mean = sum / n, std = std::sqrt(sum2 / n - mean * mean);
    EXPECT_NEAR(mean, t.init.offset, 5 * t.init.scale / std::sqrt(double(n)) + 1e-6) << t.name;
    EXPECT_NEAR(std, t.init.scale, 0.1 * t.init.scale) << t.name;
  }
}

TEST(SynthWrite, TinyReadsBackLikeTheSharedTinyModel) {
  const std::string path = temp_path("tiny_f32.gguf");
  ASSERT_TRUE(write_tiny(path, GgmlType::F32, 1, 2).is_ok());
  auto ours = GgufFile::open(path);
  ASSERT_TRUE(ours.has_value()) << ours.status().message();
  auto theirs = GgufFile::open(kTinyF32);
  ASSERT_TRUE(theirs.has_value()) << theirs.status().message();

  ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
  for (size_t i = 0; i < ours->tensors().size(); ++i) {
    const TensorInfo& a = ours->tensors()[i];
    const TensorInfo& b = theirs->tensors()[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.shape, b.shape) << a.name;
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.n_bytes, b.n_bytes) << a.name;
  }
  ASSERT_EQ(ours->metadata().size(), theirs->metadata().size());
  for (const auto& [key, value] : theirs->metadata()) {
    if (key == "general.alignment") continue;
    const GgufValue* v = ours->find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_TRUE(*v == value) << key;
  }
  // The values are the ones synth_fill_rows computes.
  const TensorInfo* norm = ours->find_tensor("blk.1.ffn_norm.weight");
  ASSERT_NE(norm, nullptr);
  float first;
  std::memcpy(&first, norm->data, 4);
  EXPECT_NEAR(first, 1.0f, 0.2f);
  std::filesystem::remove(path);
}

TEST(SynthWrite, SameSeedSameBytesAnyThreadCount) {
  const std::string a = temp_path("seed1_t1.gguf");
  const std::string b = temp_path("seed1_t2.gguf");
  const std::string c = temp_path("seed2_t2.gguf");
  ASSERT_TRUE(write_tiny(a, GgmlType::F16, 1, 1).is_ok());
  ASSERT_TRUE(write_tiny(b, GgmlType::F16, 1, 2).is_ok());
  ASSERT_TRUE(write_tiny(c, GgmlType::F16, 2, 2).is_ok());
  const std::vector<char> bytes_a = read_all(a), bytes_b = read_all(b), bytes_c = read_all(c);
  ASSERT_GT(bytes_a.size(), 10'000'000u);
  EXPECT_TRUE(bytes_a == bytes_b);
  ASSERT_EQ(bytes_a.size(), bytes_c.size());
  EXPECT_FALSE(bytes_a == bytes_c);

  // Different seeds change every tensor, not only some.
  auto fa = GgufFile::open(a);
  auto fc = GgufFile::open(c);
  ASSERT_TRUE(fa.has_value() && fc.has_value());
  for (size_t i = 0; i < fa->tensors().size(); ++i) {
    const TensorInfo& x = fa->tensors()[i];
    const TensorInfo& y = fc->tensors()[i];
    EXPECT_NE(std::memcmp(x.data, y.data, static_cast<size_t>(x.n_bytes)), 0) << x.name;
  }
  for (const auto& p : {a, b, c}) std::filesystem::remove(p);
}

TEST(SynthWrite, BlockTypesHoldTheSameValues) {
  const std::string f32 = temp_path("q_f32.gguf");
  const std::string q8 = temp_path("q_q8_0.gguf");
  ASSERT_TRUE(write_tiny(f32, GgmlType::F32, 5, 2).is_ok());
  ASSERT_TRUE(write_tiny(q8, GgmlType::Q8_0, 5, 2).is_ok());
  auto a = GgufFile::open(f32);
  auto b = GgufFile::open(q8);
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(b->get_u32("general.file_type").value(), 7u);  // MOSTLY_Q8_0
  for (const TensorInfo& ta : a->tensors()) {
    const TensorInfo* tb = b->find_tensor(ta.name);
    ASSERT_NE(tb, nullptr) << ta.name;
    EXPECT_EQ(tb->type, ta.shape.size() == 1 ? GgmlType::F32 : GgmlType::Q8_0) << ta.name;
    std::vector<float> x(ta.n_elements), y(ta.n_elements);
    std::memcpy(x.data(), ta.data, x.size() * 4);
    dequantize_row(tb->type, tb->data, y.data(), ta.n_elements);
    double max_abs = 0, max_err = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      max_abs = std::max(max_abs, double{std::fabs(x[i])});
      max_err = std::max(max_err, double{std::fabs(x[i] - y[i])});
    }
    EXPECT_LE(max_err, max_abs / 127) << ta.name;
  }
  std::filesystem::remove(f32);
  std::filesystem::remove(q8);
}

TEST(SynthPlan, MixGivesTheTypesOfPonderQuantize) {
  const SynthPreset* p = find_synth_preset("14b");
  ASSERT_NE(p, nullptr);
  auto plan = plan_synth_model(*p, QuantMix::Q4_K_M);
  ASSERT_TRUE(plan.has_value()) << plan.status().message();
  EXPECT_EQ(plan_u32(*plan, "general.file_type"), 15u);  // MOSTLY_Q4_K_M
  auto type_of = [&](const std::string& name) {
    for (const SynthTensor& t : plan->tensors) {
      if (t.name == name) return t.type;
    }
    ADD_FAILURE() << name;
    return GgmlType::F32;
  };
  EXPECT_EQ(type_of("token_embd.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("output.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("output_norm.weight"), GgmlType::F32);
  EXPECT_EQ(type_of("blk.7.attn_q.weight"), GgmlType::Q4_K);
  // llama.cpp's use_more_bits for 48 layers: the first and last 6, then every third from 8.
  EXPECT_EQ(type_of("blk.0.ffn_down.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("blk.7.ffn_down.weight"), GgmlType::Q4_K);
  EXPECT_EQ(type_of("blk.8.ffn_down.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("blk.8.attn_v.weight"), GgmlType::Q6_K);
  EXPECT_EQ(type_of("blk.8.attn_q.bias"), GgmlType::F32);
  // The tensor data of the 14B Q4_K_M file session 22 made with synth F16 + ponder quantize
  // (8,988,109,824 bytes with its metadata and alignment).
  EXPECT_GT(plan->n_bytes(), 8'980'000'000);
  EXPECT_LT(plan->n_bytes(), 8'988'109'824);
}

TEST(SynthWrite, DistinctRowsAreRepeated) {
  const std::string all = temp_path("rows_all.gguf");
  const std::string few = temp_path("rows_few.gguf");
  SynthOptions options;
  options.preset = find_synth_preset("tiny");
  options.vocab_path = kTinyF32;
  options.mix = QuantMix::Q4_K_M;
  options.seed = 3;
  options.output_path = all;
  ASSERT_TRUE(write_synth_model(options).is_ok());
  options.output_path = few;
  options.distinct_rows = 5;
  ASSERT_TRUE(write_synth_model(options).is_ok());
  auto a = GgufFile::open(all);
  auto b = GgufFile::open(few);
  ASSERT_TRUE(a.has_value() && b.has_value());
  int n_matrices = 0;
  for (const TensorInfo& ta : a->tensors()) {
    const TensorInfo* tb = b->find_tensor(ta.name);
    ASSERT_NE(tb, nullptr) << ta.name;
    ASSERT_EQ(tb->type, ta.type) << ta.name;
    if (ta.shape.size() == 1) {
      EXPECT_EQ(std::memcmp(ta.data, tb->data, static_cast<size_t>(ta.n_bytes)), 0) << ta.name;
      continue;
    }
    ++n_matrices;
    const int64_t row_bytes = ggml_row_bytes(ta.type, ta.shape[0]);
    const int64_t n_rows = ta.n_elements / ta.shape[0];
    const auto* x = static_cast<const uint8_t*>(ta.data);
    const auto* y = static_cast<const uint8_t*>(tb->data);
    for (int64_t r = 0; r < n_rows; ++r) {  // row r of the repeated file is row r % 5 of both
      ASSERT_EQ(
          std::memcmp(y + r * row_bytes, x + (r % 5) * row_bytes, static_cast<size_t>(row_bytes)),
          0)
          << ta.name << " row " << r;
    }
    EXPECT_NE(std::memcmp(x + 5 * row_bytes, x, static_cast<size_t>(row_bytes)), 0) << ta.name;
  }
  EXPECT_EQ(n_matrices, 2 + 2 * 7);
  std::filesystem::remove(all);
  std::filesystem::remove(few);
}

TEST(SynthWrite, MissingVocabularyIsAClearError) {
  SynthOptions options;
  options.preset = find_synth_preset("tiny");
  options.output_path = temp_path("never.gguf");
  options.vocab_path = "/nonexistent/vocab.gguf";
  const Status st = write_synth_model(options);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("/nonexistent/vocab.gguf"), std::string::npos) << st.message();
  EXPECT_FALSE(std::filesystem::exists(options.output_path));
}

}  // namespace
}  // namespace ponder
