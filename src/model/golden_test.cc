// Golden tests: teacher-forced logits of every tiny model and prompt against llama.cpp's, within
// the thresholds of ../shared/golden/README.md. Every type, every row.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/cpu_features.h"
#include "model/pgld.h"
#include "model/qwen2_model.h"

namespace ponder {
namespace {

const std::string kShared = PONDER_SHARED_DIR;

struct Thresholds {
  double mean, max, top1;
};

Thresholds thresholds_for(const std::string& type) {
  if (type == "F32" || type == "F16") return {0.003, 0.03, 1.0};
  return {0.02, 0.25, 0.98};
}

// Feeds the golden's whole token sequence as one batch and compares every row.
LogitDiff run_golden(Qwen2Model& model, const Pgld& golden, ThreadPool& pool) {
  const int64_t n = static_cast<int64_t>(golden.tokens.size());
  const int64_t block_size = 16;
  KvCache cache = model.make_cache((n + block_size - 1) / block_size, block_size);
  std::vector<int32_t> blocks(static_cast<size_t>(cache.n_blocks()));
  for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<int32_t>(i);
  Batch batch;
  batch.block_tables.push_back(blocks);
  for (int64_t i = 0; i < n; ++i)
    batch.rows.push_back({golden.tokens[i], static_cast<int32_t>(i), 0, true});
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n * n_vocab));
  Status st = model.forward(batch, cache, logits.data(), pool);
  EXPECT_TRUE(st.is_ok()) << st.message();
  LogitDiff diff;
  for (int64_t r = 0; r < n; ++r) diff.add_row(golden.rows[r], &logits[r * n_vocab], n_vocab);
  return diff;
}

// tiny-<type>.gguf with attention in the given order; the model views the file's mapping, so the
// file is kept beside it. model is nullptr (and the test failed) if either does not load.
struct TinyModel {
  GgufFile file;
  std::unique_ptr<Qwen2Model> model;
};

TinyModel load_tiny(const std::string& type, bool flash_attn, KvType kv = KvType::kF16,
                    bool x16 = Qwen2Model::x16_default()) {
  auto file = GgufFile::open(kShared + "/models/tiny-" + type + ".gguf");
  EXPECT_TRUE(file.has_value()) << file.status().message();
  if (!file.has_value()) return {};
  TinyModel t{std::move(*file), nullptr};
  auto model = Qwen2Model::load(t.file, x16);
  EXPECT_TRUE(model.has_value()) << model.status().message();
  if (!model.has_value()) return t;
  t.model = std::move(*model);
  t.model->set_flash_attention(flash_attn);
  EXPECT_TRUE(t.model->set_kv_types(kv, kv).is_ok());
  return t;
}

// Every golden of `type` through the model, with attention in the block (flash) or ggml order.
// Q5_K's x16 order (the default since session 8) lands at 0.0196 / 0.0233 / 0.0216 from llama.cpp's
// logits on Q5_K_M, past 0.02, while it is as close to the exact computation as llama.cpp
// (GoldenExactTest): against llama.cpp's thresholds that file runs llama.cpp's Q5_K order (no x16).
void check_goldens(const std::string& type, bool flash_attn) {
  TinyModel tiny =
      load_tiny(type, flash_attn, KvType::kF16, Qwen2Model::x16_default() && type != "Q5_K_M");
  ASSERT_NE(tiny.model, nullptr);
  Qwen2Model& model = *tiny.model;
  ThreadPool pool(2);
  const Thresholds t = thresholds_for(type);
  std::vector<std::string> goldens = {type + "-p1", type + "-p2", type + "-p3"};
  if (type == "F32" || type == "Q8_0" || type == "Q4_K_M") goldens.push_back(type + "-p1.full");
  for (const std::string& name : goldens) {
    auto golden = Pgld::read(kShared + "/golden/" + name + ".pgld");
    ASSERT_TRUE(golden.has_value()) << golden.status().message();
    ASSERT_EQ(golden->n_vocab, model.config().n_vocab);
    LogitDiff d = run_golden(model, *golden, pool);
    testing::Test::RecordProperty(name + "_mean", std::to_string(d.mean()));
    std::printf("%-16s %s mean %.5f max %.5f top1 %.3f (%lld rows)\n", name.c_str(),
                flash_attn ? "flash" : "     ", d.mean(), d.max_dlogp, d.top1_rate(),
                static_cast<long long>(d.n_top1_rows));
    EXPECT_LE(d.mean(), t.mean) << name;
    EXPECT_LE(d.max_dlogp, t.max) << name;
    EXPECT_GE(d.top1_rate(), t.top1) << name;
  }
}

// llama.cpp's own distance from the exact computation (../shared/golden/README.md): mean dlogp for
// p1, p2, p3, and top-1 agreement.
struct ExactReference {
  double mean[3], top1[3];
};

ExactReference llama_cpp_from_exact(const std::string& type) {
  static const std::map<std::string, ExactReference> table = {
      {"F32", {{0.0008, 0.0007, 0.0007}, {1.000, 1.000, 1.000}}},
      {"F16", {{0.0013, 0.0012, 0.0011}, {1.000, 1.000, 1.000}}},
      {"BF16", {{0.0085, 0.0079, 0.0079}, {1.000, 1.000, 1.000}}},
      {"Q8_0", {{0.0303, 0.0278, 0.0270}, {1.000, 1.000, 1.000}}},
      {"Q4_0", {{0.0290, 0.0281, 0.0285}, {1.000, 1.000, 1.000}}},
      {"Q4_1", {{0.0314, 0.0286, 0.0284}, {1.000, 1.000, 0.993}}},
      {"Q5_0", {{0.0304, 0.0281, 0.0286}, {1.000, 1.000, 1.000}}},
      {"Q5_1", {{0.0322, 0.0292, 0.0288}, {1.000, 1.000, 1.000}}},
      {"Q2_K", {{0.0449, 0.0422, 0.0407}, {1.000, 1.000, 1.000}}},
      {"Q3_K_M", {{0.0427, 0.0392, 0.0396}, {0.977, 1.000, 0.993}}},
      {"Q4_K_M", {{0.0430, 0.0390, 0.0396}, {0.989, 1.000, 1.000}}},
      {"Q5_K_M", {{0.0421, 0.0392, 0.0390}, {1.000, 0.984, 0.994}}},
      {"Q6_K", {{0.0428, 0.0402, 0.0397}, {0.989, 1.000, 0.986}}},
  };
  return table.at(type);
}

// llama.cpp's distance from the exact computation with its Q8_0 K/V cache (`-ctk q8_0 -ctv q8_0
// -fa 1`): the q8_0+FA columns of ../shared/golden/kv-q8_0/llama_from_exact.tsv, the reference of
// that directory's rule (a Q8_0 cache judged like with like).
ExactReference llama_cpp_q8_0_kv_from_exact(const std::string& type) {
  std::ifstream in(kShared + "/golden/kv-q8_0/llama_from_exact.tsv");
  EXPECT_TRUE(in.good()) << "kv-q8_0/llama_from_exact.tsv";
  ExactReference r{};
  int mean_col = -1, top1_col = -1, found = 0;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, '\t');) cols.push_back(c);
    if (cols[0] == "file") {
      for (size_t i = 0; i < cols.size(); ++i) {
        if (cols[i] == "q8_0+FA mean_dlogp") mean_col = static_cast<int>(i);
        if (cols[i] == "q8_0+FA top1") top1_col = static_cast<int>(i);
      }
      continue;
    }
    for (int p = 0; p < 3; ++p) {
      if (cols[0] != type + "-p" + std::to_string(p + 1) || mean_col < 0 || top1_col < 0) continue;
      r.mean[p] = std::stod(cols[static_cast<size_t>(mean_col)]);
      r.top1[p] = std::stod(cols[static_cast<size_t>(top1_col)]);
      found++;
    }
  }
  EXPECT_EQ(found, 3) << type << ": three files in llama_from_exact.tsv";
  return r;
}

// The rule for a float order other than llama.cpp's: against exact/<TYPE>-<p>.pgld, mean dlogp at
// most 1.1 x llama.cpp's + 0.001 and top-1 agreement at least llama.cpp's - 0.02. A mean_bound
// > 0 replaces the first bound (a lossy KV cache on unquantized weights).
// Scores: the block order's f32, bf16 or (a Q8_0 K cache) int8 scores (Qwen2Model::set_bf16_scores,
// set_int8_scores).
// Reference: llama.cpp with its F16 K/V cache (../shared/golden/README.md), or with its Q8_0 K/V
// cache (the kv-q8_0 rule: ../shared/golden/kv-q8_0/README.md).
enum class Scores { kF32, kBf16, kInt8 };
enum class Reference { kF16Cache, kQ8_0Cache };

void check_exact_rule(const std::string& type, bool flash_attn, KvType kv = KvType::kF16,
                      double mean_bound = 0, Scores scores = Scores::kF32,
                      Reference reference = Reference::kF16Cache) {
  TinyModel tiny = load_tiny(type, flash_attn, kv);
  ASSERT_NE(tiny.model, nullptr);
  Qwen2Model& model = *tiny.model;
  model.set_bf16_scores(scores == Scores::kBf16);
  model.set_int8_scores(scores == Scores::kInt8);
  ThreadPool pool(2);
  const ExactReference ref = reference == Reference::kQ8_0Cache ? llama_cpp_q8_0_kv_from_exact(type)
                                                                : llama_cpp_from_exact(type);
  for (int p = 0; p < 3; ++p) {
    const std::string name = type + "-p" + std::to_string(p + 1);
    auto exact = Pgld::read(kShared + "/golden/exact/" + name + ".pgld");
    ASSERT_TRUE(exact.has_value()) << exact.status().message();
    LogitDiff d = run_golden(model, *exact, pool);
    const double bound = mean_bound > 0 ? mean_bound : 1.1 * ref.mean[p] + 0.001;
    std::printf(
        "%-12s %s %s from exact: mean %.5f (llama.cpp%s %.4f, bound %.5f) top1 %.3f (llama.cpp "
        "%.3f)\n",
        name.c_str(),
        !flash_attn               ? "ggml "
        : scores == Scores::kBf16 ? "bf16qk"
        : scores == Scores::kInt8 ? "i8qk  "
                                  : "flash",
        kv_type_name(kv), d.mean(), reference == Reference::kQ8_0Cache ? " q8_0 K/V" : "",
        ref.mean[p], bound, d.top1_rate(), ref.top1[p]);
    EXPECT_LE(d.mean(), bound) << name;
    // The TSVs give llama.cpp's rate to five decimals (148/150 as 0.98667): half a unit of the
    // last place of slack, so a rate exactly at the bound (145/150) is not failed by the rounding.
    EXPECT_GE(d.top1_rate(), ref.top1[p] - 0.02 - 5e-6) << name;
  }
}

// The golden files' weight types.
const std::vector<std::string> kUnquantized = {"F32", "F16", "BF16"};
const std::vector<std::string> kQuantized = {"Q8_0", "Q4_0",   "Q4_1",   "Q5_0",   "Q5_1",
                                             "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"};
std::vector<std::string> all_types() {
  std::vector<std::string> t = kUnquantized;
  t.insert(t.end(), kQuantized.begin(), kQuantized.end());
  return t;
}

class GoldenTest : public testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, TeacherForcedLogitsMatchLlamaCpp) { check_goldens(GetParam(), false); }

// The block order (the default) is another float order of the same attention: on the files whose
// activations are not rounded to int8 (so not chaotic: docs/numerics.md) it stays within the
// thresholds against llama.cpp's logits too. On the quantized files it lands near 0.027 mean dlogp
// from llama.cpp's logits, and is judged by the exact rule instead (GoldenExactTest).
class GoldenFlashTest : public testing::TestWithParam<std::string> {};

TEST_P(GoldenFlashTest, FlashAttentionWithinThresholds) { check_goldens(GetParam(), true); }

// The suites ctest runs again per ISA level (PONDER_ISA): where the CPU lacks the level,
// active_isa() falls back to the best one and the pass would only repeat the default run, so it
// skips.
class PerIsaGoldenTest : public testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const char* forced = std::getenv("PONDER_ISA");
    if (forced != nullptr && *forced != '\0' && std::string(forced) != isa_name(active_isa()))
      GTEST_SKIP() << "PONDER_ISA=" << forced << " is not supported by this CPU";
  }
};

// Both orders meet the exact rule on every file (the ggml order is llama.cpp's own, so it must).
class GoldenExactTest : public PerIsaGoldenTest {};

TEST_P(GoldenExactTest, FlashOrderMeetsTheExactRule) { check_exact_rule(GetParam(), true); }
TEST_P(GoldenExactTest, GgmlOrderMeetsTheExactRule) { check_exact_rule(GetParam(), false); }
// A Q8_0 KV cache (--cache-type-k/-v q8_0) rounds K and V to 8 bits, and is judged like with
// like: against llama.cpp with its own Q8_0 cache (the kv-q8_0 rule), on every file.
class GoldenQ8CacheTest : public testing::TestWithParam<std::string> {};
TEST_P(GoldenQ8CacheTest, Q8_0CacheMeetsTheKvQ8_0Rule) {
  check_exact_rule(GetParam(), true, KvType::kQ8_0, 0, Scores::kF32, Reference::kQ8_0Cache);
}
class GoldenQ8CacheBf16ScoresTest : public testing::TestWithParam<std::string> {};
TEST_P(GoldenQ8CacheBf16ScoresTest, Q8_0CacheWithBf16ScoresMeetsTheKvQ8_0Rule) {
  check_exact_rule(GetParam(), true, KvType::kQ8_0, 0, Scores::kBf16, Reference::kQ8_0Cache);
}
INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenQ8CacheBf16ScoresTest, testing::ValuesIn(all_types()));
// The int8-scores variant (`--attn-scores int8`: q rounded to Q8_0, llama.cpp's own route for a
// Q8_0 cache; the scalar reference where neither AVX512_VNNI nor AVX-VNNI is).
class GoldenQ8CacheInt8ScoresTest : public PerIsaGoldenTest {};
TEST_P(GoldenQ8CacheInt8ScoresTest, Q8_0CacheWithInt8ScoresMeetsTheKvQ8_0Rule) {
  check_exact_rule(GetParam(), true, KvType::kQ8_0, 0, Scores::kInt8, Reference::kQ8_0Cache);
}
INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenQ8CacheInt8ScoresTest, testing::ValuesIn(all_types()));
// The bf16-scores variant (the default for quantized weights with an f16 K cache where AVX512_BF16
// runs it; the scalar reference elsewhere). A Q8_0 K cache takes them only when set: judged by the
// f16-cache rule the two roundings together measured past it on 4 of the 10 types (Q8_0-p3 0.0308
// against 0.0307); by the kv-q8_0 rule they pass (GoldenQ8CacheBf16ScoresTest), and the Q8_0
// cache's default is int8 scores where AVX512_VNNI runs them (GoldenQ8CacheInt8ScoresTest).
class GoldenBf16ScoresTest : public testing::TestWithParam<std::string> {};
TEST_P(GoldenBf16ScoresTest, Bf16ScoresMeetTheExactRule) {
  check_exact_rule(GetParam(), true, KvType::kF16, 0, Scores::kBf16);
}
INSTANTIATE_TEST_SUITE_P(Quantized, GoldenBf16ScoresTest, testing::ValuesIn(kQuantized));

// A bf16 KV cache (the default where bf16 scores are: Qwen2Model::default_kv_type) rounds K and V
// to bf16 once and sums V by vdpbf16ps with each weight rounded to bf16 (block_attention.h): on
// the quantized files it meets the exact rule. On F32 / F16 / BF16 weights (not its default) it is
// lossy like Q8_0 and held to the quantized threshold.
class GoldenBf16CacheTest : public testing::TestWithParam<std::string> {};
TEST_P(GoldenBf16CacheTest, Bf16CacheMeetsTheExactRule) {
  check_exact_rule(GetParam(), true, KvType::kBF16, 0, Scores::kBf16);
}
INSTANTIATE_TEST_SUITE_P(Quantized, GoldenBf16CacheTest, testing::ValuesIn(kQuantized));
class GoldenBf16CacheUnquantizedTest : public testing::TestWithParam<std::string> {};
TEST_P(GoldenBf16CacheUnquantizedTest, Bf16CacheWithinTheQuantizedThreshold) {
  check_exact_rule(GetParam(), true, KvType::kBF16, 0.02, Scores::kBf16);
}
INSTANTIATE_TEST_SUITE_P(Unquantized, GoldenBf16CacheUnquantizedTest,
                         testing::ValuesIn(kUnquantized));

INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenQ8CacheTest, testing::ValuesIn(all_types()));

INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenExactTest, testing::ValuesIn(all_types()));

INSTANTIATE_TEST_SUITE_P(Unquantized, GoldenFlashTest, testing::ValuesIn(kUnquantized));

INSTANTIATE_TEST_SUITE_P(AllTypes, GoldenTest, testing::ValuesIn(all_types()));

}  // namespace
}  // namespace ponder
