// The shared tiny models were written by llama.cpp (llama-quantize from tiny-F32.gguf, no
// importance matrix). Dequantizing them must give back the F32 weights within what each format
// allows, and our quantizer, given the F32 weights, must do at least as well; in fact it writes
// the very same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "gguf/gguf_file.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

const std::string kModels = std::string(PONDER_SHARED_DIR) + "/models/";

// Largest relative RMSE (RMSE / RMS of the F32 tensor) of any tensor of each type in the shared
// tiny files, times 1.5: the formats' own error on these (Gaussian-like) random weights. Observed:
// F16 2.09e-4, BF16 1.68e-3, Q8_0 5.40e-3, Q6_K 1.80e-2, Q5_1 3.79e-2, Q5_0 4.29e-2,
// Q5_K 3.63e-2, Q4_1 7.85e-2, Q4_0 8.69e-2, Q4_K 7.17e-2, Q3_K 0.152, Q2_K 0.297.
const std::map<GgmlType, double> kRelRmseBound = {
    {GgmlType::F16, 3.1e-4},  {GgmlType::BF16, 2.5e-3}, {GgmlType::Q8_0, 8.1e-3},
    {GgmlType::Q6_K, 2.7e-2}, {GgmlType::Q5_1, 5.7e-2}, {GgmlType::Q5_0, 6.4e-2},
    {GgmlType::Q5_K, 5.4e-2}, {GgmlType::Q4_1, 0.118},  {GgmlType::Q4_0, 0.130},
    {GgmlType::Q4_K, 0.108},  {GgmlType::Q3_K, 0.228},  {GgmlType::Q2_K, 0.446},
};

std::vector<float> to_f32(const TensorInfo& t) {
  std::vector<float> y(static_cast<size_t>(t.n_elements));
  const int64_t row_length = t.shape[0];
  const int64_t row_bytes = ggml_row_bytes(t.type, row_length);
  for (int64_t r = 0; r < t.n_rows(); ++r) {
    dequantize_row(t.type, t.data + r * row_bytes, y.data() + r * row_length, row_length);
  }
  return y;
}

// RMSE of a against b, relative to the RMS of b.
double rel_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0.0, ss = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = static_cast<double>(a[i]) - b[i];
    se += d * d;
    ss += static_cast<double>(b[i]) * b[i];
  }
  return ss > 0.0 ? std::sqrt(se / ss) : std::sqrt(se);
}

class TinyModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(TinyModelTest, DequantizesCloseToF32) {
  auto f32 = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(f32) << f32.status().message();
  auto file = GgufFile::open(kModels + "tiny-" + GetParam() + ".gguf");
  ASSERT_TRUE(file) << file.status().message();
  ASSERT_EQ(file->tensors().size(), f32->tensors().size());
  for (const TensorInfo& t : file->tensors()) {
    const TensorInfo* ref = f32->find_tensor(t.name);
    ASSERT_NE(ref, nullptr) << t.name;
    ASSERT_EQ(t.shape, ref->shape) << t.name;
    const std::vector<float> y = to_f32(t);
    const std::vector<float> x = to_f32(*ref);
    const double err = rel_rmse(y, x);
    if (t.type == GgmlType::F32) {
      EXPECT_EQ(err, 0.0) << t.name;
      continue;
    }
    ASSERT_TRUE(kRelRmseBound.count(t.type)) << t.name << " " << ggml_type_name(t.type);
    EXPECT_LE(err, kRelRmseBound.at(t.type))
        << GetParam() << " " << t.name << " (" << ggml_type_name(t.type) << ")";
    EXPECT_GT(err, 0.0) << t.name;  // a lossy format that lost nothing: read the wrong tensor?
  }
}

TEST_P(TinyModelTest, OurQuantizerMatchesTheFile) {
  auto f32 = GgufFile::open(kModels + "tiny-F32.gguf");
  ASSERT_TRUE(f32) << f32.status().message();
  auto file = GgufFile::open(kModels + "tiny-" + GetParam() + ".gguf");
  ASSERT_TRUE(file) << file.status().message();
  for (const TensorInfo& t : file->tensors()) {
    if (t.type == GgmlType::F32) continue;
    const TensorInfo* ref = f32->find_tensor(t.name);
    ASSERT_NE(ref, nullptr);
    const std::vector<float> x = to_f32(*ref);
    std::vector<uint8_t> ours(static_cast<size_t>(t.n_bytes));
    const int64_t row_length = t.shape[0];
    const int64_t row_bytes = ggml_row_bytes(t.type, row_length);
    for (int64_t r = 0; r < t.n_rows(); ++r) {
      quantize_row(t.type, x.data() + r * row_length, ours.data() + r * row_bytes, row_length);
    }
    TensorInfo mine = t;
    mine.data = ours.data();
    const double err_ours = rel_rmse(to_f32(mine), x);
    const double err_file = rel_rmse(to_f32(t), x);
    EXPECT_LE(err_ours, err_file * 1.02) << t.name << " (" << ggml_type_name(t.type) << ")";
    EXPECT_EQ(std::memcmp(ours.data(), t.data, ours.size()), 0)
        << t.name << " (" << ggml_type_name(t.type) << "): bytes differ from llama.cpp's";
  }
}

INSTANTIATE_TEST_SUITE_P(Files, TinyModelTest,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1",
                                           "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ponder
