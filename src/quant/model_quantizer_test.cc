#include "quant/model_quantizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

namespace fs = std::filesystem;
const std::string kModels = std::string(PONDER_SHARED_DIR) + "/models/";

class ModelQuantizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ponder_quant_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

std::vector<float> to_f32(const TensorInfo& t) {
  std::vector<float> y(static_cast<size_t>(t.n_elements));
  const int64_t row_bytes = ggml_row_bytes(t.type, t.shape[0]);
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t.type, t.data + r * row_bytes, y.data() + r * t.shape[0], t.shape[0]);
  }
  return y;
}

TEST_F(ModelQuantizerTest, TinyF32ToQ4KMIsLlamaQuantizesFile) {
  auto in = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(in) << in.status().message();
  ModelQuantizer quantizer(QuantMix::Q4_K_M, 2);
  size_t n_progress = 0;
  quantizer.set_progress([&](size_t index, size_t count, const TensorPlan& p) {
    EXPECT_EQ(index, ++n_progress);
    EXPECT_EQ(count, in->tensors().size());
    EXPECT_EQ(p.name, in->tensors()[index - 1].name);
  });
  ASSERT_TRUE(quantizer.quantize(*in, path("q4km.gguf")).is_ok());
  EXPECT_EQ(n_progress, in->tensors().size());
  EXPECT_FALSE(fs::exists(path("q4km.gguf.tmp")));

  auto ours = GgufFile::open(path("q4km.gguf"));
  ASSERT_TRUE(ours) << ours.status().message();
  auto theirs = GgufFile::open(kModels + "tiny-Q4_K_M.gguf");
  ASSERT_TRUE(theirs) << theirs.status().message();

  // Same metadata, key for key (llama-quantize also writes file_type 15, quantization_version 2).
  ASSERT_EQ(ours->metadata().size(), theirs->metadata().size());
  for (const auto& [key, value] : theirs->metadata()) {
    const GgufValue* mine = ours->find(key);
    ASSERT_NE(mine, nullptr) << key;
    EXPECT_TRUE(*mine == value) << key << ": " << mine->describe() << " vs " << value.describe();
  }
  // Same tensors, types and bytes (in the input's order; llama.cpp sorts them by layer).
  ASSERT_EQ(ours->tensors().size(), theirs->tensors().size());
  for (const TensorInfo& t : ours->tensors()) {
    const TensorInfo* ref = theirs->find_tensor(t.name);
    ASSERT_NE(ref, nullptr) << t.name;
    EXPECT_EQ(t.type, ref->type) << t.name;
    EXPECT_EQ(t.shape, ref->shape) << t.name;
    ASSERT_EQ(t.n_bytes, ref->n_bytes) << t.name;
    EXPECT_EQ(std::memcmp(t.data, ref->data, static_cast<size_t>(t.n_bytes)), 0) << t.name;
  }
}

TEST_F(ModelQuantizerTest, RequantizesAQuantizedModel) {
  auto in = GgufFile::open(kModels + "tiny-Q8_0.gguf");
  ASSERT_TRUE(in) << in.status().message();
  ModelQuantizer quantizer(QuantMix::Q4_K_M, 2);
  ASSERT_TRUE(quantizer.quantize(*in, path("requant.gguf")).is_ok());
  auto ours = GgufFile::open(path("requant.gguf"));
  ASSERT_TRUE(ours) << ours.status().message();
  auto theirs = GgufFile::open(kModels + "tiny-Q4_K_M.gguf");
  auto f32 = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(theirs && f32);
  EXPECT_EQ(*ours->get_u32("general.file_type"), 15u);
  for (const TensorInfo& t : ours->tensors()) {
    EXPECT_EQ(t.type, theirs->find_tensor(t.name)->type) << t.name;
    // Two rounds of rounding: Q8_0's error adds little to Q4_K's (~0.072 on these weights).
    const std::vector<float> x = to_f32(*f32->find_tensor(t.name));
    const std::vector<float> y = to_f32(t);
    double se = 0.0, ss = 0.0;
    for (size_t i = 0; i < x.size(); ++i) {
      se += (static_cast<double>(y[i]) - x[i]) * (static_cast<double>(y[i]) - x[i]);
      ss += static_cast<double>(x[i]) * x[i];
    }
    EXPECT_LE(std::sqrt(se / ss), 0.08) << t.name;
  }
}

TEST_F(ModelQuantizerTest, F16InputToQ8_0) {
  auto in = GgufFile::open(kModels + "tiny-F16.gguf");
  ASSERT_TRUE(in) << in.status().message();
  ModelQuantizer quantizer(QuantMix::Q8_0, 1);
  auto plan = quantizer.plan(*in);
  ASSERT_TRUE(plan) << plan.status().message();
  auto theirs = GgufFile::open(kModels + "tiny-Q8_0.gguf");
  ASSERT_TRUE(theirs);
  for (const TensorPlan& p : *plan) EXPECT_EQ(p.to, theirs->find_tensor(p.name)->type) << p.name;
  ASSERT_TRUE(quantizer.quantize(*in, path("q8.gguf")).is_ok());
  auto ours = GgufFile::open(path("q8.gguf"));
  ASSERT_TRUE(ours) << ours.status().message();
  EXPECT_EQ(*ours->get_u32("general.file_type"), 7u);
}

TEST_F(ModelQuantizerTest, FailureLeavesNoFile) {
  auto in = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(in);
  ModelQuantizer quantizer(QuantMix::Q4_0, 1);
  const std::string out = path("missing-dir/out.gguf");
  const Status st = quantizer.quantize(*in, out);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("missing-dir"), std::string::npos) << st.message();
  EXPECT_FALSE(fs::exists(out));
  EXPECT_FALSE(fs::exists(out + ".tmp"));
}

}  // namespace
}  // namespace ponder
