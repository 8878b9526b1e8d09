// Every SIMD matmul kernel this CPU can run against the scalar reference (kernel_table.h): outputs
// must be bitwise equal, on random rows of several shapes, for full and partial output ranges; and
// a row must come out the same alone (gemv) as inside a batch (gemm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/interleave.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "quant/blocks.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

// A 64-byte aligned byte buffer.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(int64_t n) : storage_(static_cast<size_t>(n) + 64) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + ((64 - p % 64) % 64);
  }
  uint8_t* data() { return data_; }

 private:
  std::vector<uint8_t> storage_;
  uint8_t* data_;
};

struct Case {
  GgmlType type;
  Isa isa;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(ggml_type_name(info.param.type)) + "_" + isa_name(info.param.isa);
}

// Random weights [n_out, n_in] quantized to `type`, plus codes files may hold though our quantizer
// never writes them: random Q4_K scale bytes, extreme Q6_K scales, Q8_0 -128.
std::vector<uint8_t> random_weights(GgmlType type, int64_t n_in, int64_t n_out, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.05f, 3.0f);
  const int64_t row_bytes = ggml_row_bytes(type, n_in);
  std::vector<uint8_t> w(static_cast<size_t>(row_bytes * n_out));
  std::vector<float> row(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    const float s = scale(rng);
    for (float& v : row) v = s * gauss(rng);
    quantize_row(type, row.data(), w.data() + o * row_bytes, n_in);
  }
  if (type == GgmlType::Q4_K) {  // every bit of the packed scales and mins, not just likely ones
    std::uniform_int_distribution<int> byte(0, 255);
    BlockQ4_K* blocks = reinterpret_cast<BlockQ4_K*>(w.data());
    for (int64_t b = 0; b < n_out * n_in / kQK_K; b += 3) {
      for (uint8_t& s : blocks[b].scales) s = static_cast<uint8_t>(byte(rng));
    }
  }
  if (type == GgmlType::Q6_K) {  // the extreme scales
    BlockQ6_K* blocks = reinterpret_cast<BlockQ6_K*>(w.data());
    for (int64_t b = 0; b < n_out * n_in / kQK_K; b += 5) {
      blocks[b].scales[0] = -128;
      blocks[b].scales[15] = 127;
    }
  }
  if (type == GgmlType::Q8_0) {
    std::uniform_int_distribution<int64_t> pick(0, n_in * n_out - 1);
    for (int k = 0; k < 16; ++k) {
      const int64_t e = pick(rng);
      BlockQ8_0* blocks = reinterpret_cast<BlockQ8_0*>(w.data() + (e / n_in) * row_bytes);
      blocks[(e % n_in) / kQK].qs[e % kQK] = -128;
    }
  }
  return w;
}

// Activations [n_rows, n_in] with per-row scales, outliers, an all-zero block and a tie of the
// largest magnitudes now and then.
std::vector<float> random_activations(int64_t n_in, int64_t n_rows, std::mt19937& rng) {
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(0.01f, 20.0f);
  std::uniform_int_distribution<int> coin(0, 9);
  std::vector<float> x(static_cast<size_t>(n_in * n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    const float s = scale(rng);
    for (int64_t i = 0; i < n_in; ++i)
      x[r * n_in + i] = s * gauss(rng) * (coin(rng) == 0 ? 8.0f : 1.0f);
    if (coin(rng) == 0) std::memset(&x[r * n_in], 0, sizeof(float) * std::min<int64_t>(256, n_in));
    if (coin(rng) ==
        1) {  // two largest magnitudes of opposite sign: the first one sets Q8_K's sign
      x[r * n_in + 3] = 100.0f * s;
      x[r * n_in + 7] = -100.0f * s;
    }
  }
  return x;
}

// y[n_rows, n_out] from kernel k over outputs [o_begin, o_end) (others left as they were).
void run_kernel(const MatmulKernel& k, const WeightView& w, const float* x, int64_t n_rows,
                int64_t o_begin, int64_t o_end, float* y) {
  const int64_t xb = k.packed_row_bytes(w.n_in);
  AlignedBuffer xp(xb * n_rows);
  for (int64_t r = 0; r < n_rows; ++r) k.pack_row(x + r * w.n_in, xp.data() + r * xb, w.n_in);
  k.gemm(w, xp.data(), n_rows, o_begin, o_end, y, w.n_out);
}

class SimdKernelTest : public testing::TestWithParam<Case> {
 protected:
  const MatmulKernel* kernel() {
    const MatmulKernel* k = find_matmul_kernel(GetParam().type, GetParam().isa);
    if (k == nullptr || k->isa != GetParam().isa) return nullptr;
    return k;
  }
};

TEST_P(SimdKernelTest, BitwiseEqualToScalarReference) {
  const MatmulKernel* k = kernel();
  if (k == nullptr)
    GTEST_SKIP() << "no " << isa_name(GetParam().isa) << " kernel for this type on this CPU";
  const MatmulKernel* ref = find_matmul_kernel(GetParam().type, Isa::kScalar);
  ASSERT_NE(ref, nullptr);
  std::mt19937 rng(77 + static_cast<unsigned>(GetParam().type));
  struct Shape {
    int64_t n_in, n_out, n_rows;
  };
  std::vector<Shape> shapes = {{256, 1, 1},  {256, 37, 5},  {512, 3, 37},  {768, 17, 1},
                               {1536, 9, 4}, {1536, 64, 7}, {2304, 5, 13}, {8960, 7, 3},
                               {8960, 2, 1}, {4096, 33, 9}};
  if (GetParam().type == GgmlType::F16) {  // rows that are not whole runs of 64 or 16
    shapes.insert(shapes.end(), {{200, 5, 3}, {208, 7, 1}, {208, 7, 6}, {16, 3, 2}});
  }
  for (const Shape& s : shapes) {
    SCOPED_TRACE(testing::Message()
                 << "n_in " << s.n_in << " n_out " << s.n_out << " n_rows " << s.n_rows);
    const std::vector<uint8_t> wq = random_weights(GetParam().type, s.n_in, s.n_out, rng);
    const WeightView w{GetParam().type, wq.data(), s.n_in, s.n_out};
    const std::vector<float> x = random_activations(s.n_in, s.n_rows, rng);
    std::vector<float> y_ref(static_cast<size_t>(s.n_rows * s.n_out), NAN);
    std::vector<float> y(y_ref.size(), NAN);
    run_kernel(*ref, w, x.data(), s.n_rows, 0, s.n_out, y_ref.data());
    run_kernel(*k, w, x.data(), s.n_rows, 0, s.n_out, y.data());
    for (size_t e = 0; e < y.size(); ++e) {
      ASSERT_EQ(std::memcmp(&y[e], &y_ref[e], sizeof(float)), 0)
          << "row " << e / s.n_out << " out " << e % s.n_out << ": " << y[e] << " vs " << y_ref[e];
    }
    // The reference kernel is the row dot itself.
    const RowDotFn dot = row_dot_function(GetParam().type);
    std::vector<uint8_t> xq(
        static_cast<size_t>(ggml_row_bytes(dot_activation_type(GetParam().type), s.n_in)));
    quantize_activation_row(dot_activation_type(GetParam().type), x.data(), xq.data(), s.n_in);
    EXPECT_EQ(dot(wq.data(), xq.data(), s.n_in), y_ref[0]);

    // Uneven output ranges, as the thread pool hands them out.
    std::vector<float> y_split(y.size(), NAN);
    for (int64_t o = 0; o < s.n_out;) {
      const int64_t e = std::min(s.n_out, o + 1 + o % 5);
      run_kernel(*k, w, x.data(), s.n_rows, o, e, y_split.data());
      o = e;
    }
    EXPECT_EQ(std::memcmp(y_split.data(), y.data(), y.size() * sizeof(float)), 0);
  }
}

TEST_P(SimdKernelTest, RowAloneEqualsRowInBatch) {
  const MatmulKernel* k = kernel();
  if (k == nullptr)
    GTEST_SKIP() << "no " << isa_name(GetParam().isa) << " kernel for this type on this CPU";
  std::mt19937 rng(991);
  const int64_t n_in = 1536, n_out = 29, n_rows = 11;
  const std::vector<uint8_t> wq = random_weights(GetParam().type, n_in, n_out, rng);
  const WeightView w{GetParam().type, wq.data(), n_in, n_out};
  const std::vector<float> x = random_activations(n_in, n_rows, rng);
  std::vector<float> y_batch(static_cast<size_t>(n_rows * n_out));
  run_kernel(*k, w, x.data(), n_rows, 0, n_out, y_batch.data());
  for (int64_t r = 0; r < n_rows; ++r) {
    std::vector<float> y_alone(static_cast<size_t>(n_out));
    run_kernel(*k, w, x.data() + r * n_in, 1, 0, n_out, y_alone.data());
    EXPECT_EQ(std::memcmp(y_alone.data(), y_batch.data() + r * n_out, n_out * sizeof(float)), 0)
        << "row " << r;
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16}) {
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) cases.push_back({t, isa});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(AllKernels, SimdKernelTest, testing::ValuesIn(all_cases()), case_name);

// --- x16 layout kernels (kernels/interleave.h) ---------------------------------------------------

// Each x16 SIMD kernel (AVX2, AVX-512) the CPU can run, whichever one active_isa() would pick.
class X16KernelTest : public testing::TestWithParam<Case> {
 protected:
  const MatmulKernel* kernel() {
    const MatmulKernel* k = find_x16_matmul_kernel(GetParam().type, GetParam().isa);
    if (k == nullptr || k->isa != GetParam().isa) return nullptr;
    return k;
  }
};

// The x16 copy of w, 64-byte aligned.
AlignedBuffer interleaved(WeightView& w) {
  AlignedBuffer buf(x16_bytes(w));
  x16_interleave(w, 0, w.n_out / kX16Rows, buf.data());
  return buf;
}

TEST_P(X16KernelTest, SimdOnInterleavedRowsEqualsScalarX16Order) {
  const GgmlType type = GetParam().type;
  const MatmulKernel* k = kernel();
  if (k == nullptr)
    GTEST_SKIP() << "no " << isa_name(GetParam().isa) << " x16 kernel for this type on this CPU";
  const MatmulKernel* ref = find_x16_matmul_kernel(type, Isa::kScalar);
  ASSERT_NE(ref, nullptr);
  ASSERT_TRUE(ref->x16 && k->x16);
  std::mt19937 rng(5 + static_cast<unsigned>(type));
  struct Shape {
    int64_t n_in, n_out, n_rows;
  };
  for (const Shape& s : std::vector<Shape>{{256, 16, 1}, {256, 48, 5}, {1536, 32, 1},
                                           {1536, 64, 9}, {512, 16, 4}, {8960, 16, 3},
                                           {2304, 32, 13}}) {
    SCOPED_TRACE(testing::Message()
                 << "n_in " << s.n_in << " n_out " << s.n_out << " n_rows " << s.n_rows);
    const std::vector<uint8_t> wq = random_weights(type, s.n_in, s.n_out, rng);
    WeightView w{type, wq.data(), s.n_in, s.n_out};
    ASSERT_TRUE(x16_supported(w.type, w.n_out, w.n_in));
    AlignedBuffer x16 = interleaved(w);
    w.x16 = x16.data();
    const std::vector<float> x = random_activations(s.n_in, s.n_rows, rng);
    std::vector<float> y_ref(static_cast<size_t>(s.n_rows * s.n_out), NAN);
    std::vector<float> y(y_ref.size(), NAN);
    run_kernel(*ref, w, x.data(), s.n_rows, 0, s.n_out, y_ref.data());
    run_kernel(*k, w, x.data(), s.n_rows, 0, s.n_out, y.data());
    for (size_t e = 0; e < y.size(); ++e) {
      ASSERT_EQ(std::memcmp(&y[e], &y_ref[e], sizeof(float)), 0)
          << "row " << e / s.n_out << " out " << e % s.n_out << ": " << y[e] << " vs " << y_ref[e];
    }
    // Output ranges in groups of 16, as matmul() splits them; and each row alone.
    std::vector<float> y_split(y.size(), NAN);
    for (int64_t o = 0; o < s.n_out; o += kX16Rows)
      run_kernel(*k, w, x.data(), s.n_rows, o, o + kX16Rows, y_split.data());
    EXPECT_EQ(std::memcmp(y_split.data(), y.data(), y.size() * sizeof(float)), 0);
    for (int64_t r = 0; r < s.n_rows; ++r) {
      std::vector<float> y_alone(static_cast<size_t>(s.n_out));
      run_kernel(*k, w, x.data() + r * s.n_in, 1, 0, s.n_out, y_alone.data());
      EXPECT_EQ(std::memcmp(y_alone.data(), y.data() + r * s.n_out, s.n_out * sizeof(float)), 0)
          << "row " << r;
    }
  }
}

// Every weight at its largest code (Q4_K 15 with scales and mins 63, Q6_K 63 with scales -128 and
// 127, Q8_0 -128) against activations of largest magnitude and one sign: the int16 sums of the
// kernels without 32-bit dot products come closest to saturating here.
std::vector<uint8_t> extreme_weights(GgmlType type, int64_t n_in, int64_t n_out) {
  constexpr uint16_t kOne = 0x3C00;  // f16 1.0
  const int64_t nb = n_in * n_out / (type == GgmlType::Q8_0 ? kQK : kQK_K);
  std::vector<uint8_t> w(static_cast<size_t>(ggml_row_bytes(type, n_in) * n_out));
  for (int64_t b = 0; b < nb; ++b) {
    if (type == GgmlType::Q4_K) {
      BlockQ4_K& q = reinterpret_cast<BlockQ4_K*>(w.data())[b];
      q.d = q.dmin = kOne;
      std::memset(q.scales, 0xFF, sizeof(q.scales));
      std::memset(q.qs, 0xFF, sizeof(q.qs));
    } else if (type == GgmlType::Q6_K) {
      BlockQ6_K& q = reinterpret_cast<BlockQ6_K*>(w.data())[b];
      q.d = kOne;
      std::memset(q.ql, 0xFF, sizeof(q.ql));
      std::memset(q.qh, 0xFF, sizeof(q.qh));
      for (int s = 0; s < 16; ++s) q.scales[s] = static_cast<int8_t>(s % 2 == 0 ? -128 : 127);
    } else {
      BlockQ8_0& q = reinterpret_cast<BlockQ8_0*>(w.data())[b];
      q.d = kOne;
      std::memset(q.qs, 0x80, sizeof(q.qs));
    }
  }
  return w;
}

TEST_P(X16KernelTest, ExtremeCodesDoNotSaturate) {
  const MatmulKernel* k = kernel();
  if (k == nullptr)
    GTEST_SKIP() << "no " << isa_name(GetParam().isa) << " x16 kernel for this type on this CPU";
  const MatmulKernel* ref = find_x16_matmul_kernel(GetParam().type, Isa::kScalar);
  ASSERT_NE(ref, nullptr);
  const int64_t n_in = 512, n_out = 32, n_rows = 3;
  const std::vector<uint8_t> wq = extreme_weights(GetParam().type, n_in, n_out);
  WeightView w{GetParam().type, wq.data(), n_in, n_out};
  AlignedBuffer x16 = interleaved(w);
  w.x16 = x16.data();
  // Rows of +1, of -1, and of +1 after one -1 (Q8_K's sign follows the first largest magnitude,
  // so this one rounds to +127 where the first rounds to -127).
  std::vector<float> x(static_cast<size_t>(n_in * n_rows), 1.0f);
  for (int64_t i = 0; i < n_in; ++i) x[n_in + i] = -1.0f;
  x[2 * n_in] = -1.0f;
  std::vector<float> y_ref(static_cast<size_t>(n_rows * n_out), NAN);
  std::vector<float> y(y_ref.size(), NAN);
  run_kernel(*ref, w, x.data(), n_rows, 0, n_out, y_ref.data());
  run_kernel(*k, w, x.data(), n_rows, 0, n_out, y.data());
  for (size_t e = 0; e < y.size(); ++e) {
    ASSERT_EQ(std::memcmp(&y[e], &y_ref[e], sizeof(float)), 0)
        << "row " << e / n_out << " out " << e % n_out << ": " << y[e] << " vs " << y_ref[e];
  }
}

std::vector<Case> x16_cases() {
  std::vector<Case> cases;
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
    for (Isa isa : {Isa::kAvx2, Isa::kAvx512}) cases.push_back({t, isa});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(X16, X16KernelTest, testing::ValuesIn(x16_cases()), case_name);

// The x16 order is the same sum as llama.cpp's order, rounded differently: both stay within a few
// float roundings of the dot computed in double from the dequantized values.
class X16OrderTest : public testing::TestWithParam<GgmlType> {};

TEST_P(X16OrderTest, X16OrderIsTheSameDotAsTheGgmlOrder) {
  std::mt19937 rng(17);
  const int64_t n_in = 4096;
  const std::vector<uint8_t> wq = random_weights(GetParam(), n_in, 8, rng);
  const std::vector<float> x = random_activations(n_in, 1, rng);
  const auto x16_dot = GetParam() == GgmlType::Q4_K   ? dot_q4_K_x16_order
                       : GetParam() == GgmlType::Q6_K ? dot_q6_K_x16_order
                                                      : dot_q8_0_x16_order;
  const GgmlType at = dot_activation_type(GetParam());
  std::vector<uint8_t> xq(static_cast<size_t>(ggml_row_bytes(at, n_in)));
  quantize_activation_row(at, x.data(), xq.data(), n_in);
  std::vector<float> xd(static_cast<size_t>(n_in)), wd(static_cast<size_t>(n_in));
  dequantize_row(at, xq.data(), xd.data(), n_in);
  const int64_t row_bytes = ggml_row_bytes(GetParam(), n_in);
  for (int64_t o = 0; o < 8; ++o) {
    const uint8_t* row = wq.data() + o * row_bytes;
    dequantize_row(GetParam(), row, wd.data(), n_in);
    double exact = 0.0, magnitude = 0.0;
    for (int64_t i = 0; i < n_in; ++i) {
      exact += static_cast<double>(wd[i]) * xd[i];
      magnitude += std::fabs(static_cast<double>(wd[i]) * xd[i]);
    }
    const double tol = 1e-5 * magnitude;
    EXPECT_NEAR(x16_dot(row, xq.data(), n_in), exact, tol) << "row " << o;
    EXPECT_NEAR(row_dot_function(GetParam())(row, xq.data(), n_in), exact, tol) << "row " << o;
  }
}

INSTANTIATE_TEST_SUITE_P(X16, X16OrderTest, testing::Values(GgmlType::Q4_K, GgmlType::Q6_K,
                                                        GgmlType::Q8_0),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

TEST(KernelTableTest, FallsBackToScalarAndKnowsNoDotTypes) {
  const MatmulKernel* k = find_matmul_kernel(GgmlType::Q5_1, Isa::kAvx512);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->isa, Isa::kScalar);
  EXPECT_EQ(find_matmul_kernel(GgmlType::Q8_K, Isa::kScalar), nullptr);
  ASSERT_NE(active_matmul_kernel(GgmlType::Q4_K), nullptr);
}

}  // namespace
}  // namespace ponder
