// The llama.cpp-order row dots must also be right: each equals, within a tight tolerance, the
// double-precision dot of the dequantized weight row with the dequantized activation row.
// (That their float order is llama.cpp's was checked bit for bit against libggml-cpu's vec_dot
// and quantize_row_q8_* on random rows; the golden test is what guards it here.)
#include "kernels/dot_ggml_order.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/ggml_math.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "cpu/cpu_features.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

// Dequantized activations of type at, plus (for Q8_1) the f16 rounding allowance of the stored
// block sums s, which the Q4_1 / Q5_1 dots use instead of d * sum(q): |m| * |s| * 2^-11 per block.
std::vector<float> dequantize_activations(GgmlType at, const std::vector<uint8_t>& xq, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  if (at == GgmlType::Q8_1) {
    for (int64_t b = 0; b < n / kQK; ++b) {
      const uint8_t* blk = xq.data() + b * 36;
      uint16_t d;
      std::memcpy(&d, blk, 2);
      for (int j = 0; j < kQK; ++j)
        x[b * kQK + j] = fp16_to_fp32(d) * static_cast<int8_t>(blk[4 + j]);
    }
  } else {
    dequantize_row(at, xq.data(), x.data(), n);
  }
  return x;
}

double q8_1_sum_allowance(GgmlType wt, const std::vector<uint8_t>& wq,
                          const std::vector<uint8_t>& xq, int64_t n) {
  if (wt != GgmlType::Q4_1 && wt != GgmlType::Q5_1) return 0;
  const int64_t wbytes = wt == GgmlType::Q4_1 ? 20 : 24;
  double a = 0;
  for (int64_t b = 0; b < n / kQK; ++b) {
    uint16_t m, s;
    std::memcpy(&m, wq.data() + b * wbytes + 2, 2);
    std::memcpy(&s, xq.data() + b * 36 + 2, 2);
    a += std::fabs(double(fp16_to_fp32(m)) * fp16_to_fp32(s)) * 0x1p-11;
  }
  return a;
}

class RowDotTest : public testing::TestWithParam<GgmlType> {};

TEST_P(RowDotTest, MatchesDequantizedDoubleDot) {
  const GgmlType wt = GetParam();
  const GgmlType at = dot_activation_type(wt);
  const RowDotFn dot = row_dot_function(wt, 1);
  ASSERT_NE(dot, nullptr);
  std::mt19937 rng(1234 + static_cast<unsigned>(wt));
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t n = 256 * (1 + trial % 4);
    std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    const float w_scale = std::exp(gauss(rng)), x_scale = std::exp(2 * gauss(rng));
    const float w_offset = trial % 2 ? 0.0f : 0.3f * w_scale;  // exercise the min / offset terms
    for (float& v : w) v = w_offset + w_scale * gauss(rng);
    for (float& v : x) v = x_scale * gauss(rng) * (rng() % 16 == 0 ? 6.0f : 1.0f);

    std::vector<uint8_t> wq(static_cast<size_t>(ggml_row_bytes(wt, n)));
    std::vector<uint8_t> xq(static_cast<size_t>(ggml_row_bytes(at, n)));
    quantize_row(wt, w.data(), wq.data(), n);
    quantize_activation_row(at, x.data(), xq.data(), n);

    std::vector<float> wd(static_cast<size_t>(n));
    dequantize_row(wt, wq.data(), wd.data(), n);
    const std::vector<float> xd = dequantize_activations(at, xq, n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(wd[i]) * xd[i];
      mag += std::fabs(double(wd[i]) * xd[i]);
    }
    // Float accumulation over at most a few hundred fused steps: 1e-5 of the magnitude sum is
    // ~100 ulps of headroom while a wrong scale, quant or block would be off by far more.
    const double tol = 1e-5 * mag + q8_1_sum_allowance(wt, wq, xq, n) + 1e-30;
    EXPECT_NEAR(dot(wq.data(), xq.data(), n), ref, tol)
        << ggml_type_name(wt) << " n=" << n << " trial " << trial;
    // Batch invariance: the dot for a batch of rows is the single-row dot.
    EXPECT_EQ(row_dot_function(wt, 4), row_dot_function(wt, 1)) << ggml_type_name(wt);
  }
}

INSTANTIATE_TEST_SUITE_P(AllWeightTypes, RowDotTest,
                         testing::Values(GgmlType::F32, GgmlType::F16, GgmlType::BF16,
                                         GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                                         GgmlType::Q5_1, GgmlType::Q8_0, GgmlType::Q2_K,
                                         GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                                         GgmlType::Q6_K),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

// ggml_vec_dot_f16 / _f32 order handles lengths that are not a multiple of 64 (leftovers).
TEST(FloatDots, OddLengthsMatchDoubleDot) {
  std::mt19937 rng(99);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (int64_t n : {1, 15, 63, 64, 65, 200, 333}) {
    std::vector<float> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    std::vector<uint16_t> wh(static_cast<size_t>(n)), xh(static_cast<size_t>(n));
    double ref32 = 0, ref16 = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      w[i] = gauss(rng);
      x[i] = gauss(rng);
      wh[i] = fp32_to_fp16(w[i]);
      xh[i] = fp32_to_fp16(x[i]);
      ref32 += double(w[i]) * x[i];
      ref16 += double(fp16_to_fp32(wh[i])) * fp16_to_fp32(xh[i]);
      mag += std::fabs(double(w[i]) * x[i]);
    }
    EXPECT_NEAR(dot_f32(w.data(), x.data(), n), ref32, 1e-6 * mag + 1e-30) << n;
    EXPECT_NEAR(dot_f16_ggml(wh.data(), xh.data(), n), ref16, 1e-6 * mag + 1e-30) << n;
  }
}

// ggml's exp approximation is within a few ulps of the true exp (bit-exactness against llama.cpp
// was checked separately), with its saturation beyond |x / ln 2| > 192.
TEST(GgmlMath, ExpSiluSoftmax) {
  for (float x = -80.0f; x <= 80.0f; x += 0.0137f) {
    const double e = std::exp(double(x));
    EXPECT_NEAR(expf_ggml(x), e, 4e-7 * e) << x;
  }
  EXPECT_EQ(expf_ggml(-200.0f), 0.0f);
  EXPECT_EQ(expf_ggml(200.0f), INFINITY);
  EXPECT_NEAR(silu_ggml(1.0f), 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  std::vector<float> x(37), y(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i);
  const double sum = softmax_exp_sum_ggml(x.data(), 3.6f, 37, y.data());
  double ref = 0;
  for (float v : x) ref += std::exp(double(v) - 3.6);
  EXPECT_NEAR(sum, ref, 1e-6 * ref);
  EXPECT_NEAR(y[36], 1.0, 1e-6);
}

// The 16-wide paths of swiglu_ggml and softmax_exp_sum_ggml (SIMD where the CPU has it) give, lane
// by lane, the scalar expf_ggml / silu_ggml bits: over a dense sweep, the saturation limits, values
// whose exp is subnormal, and signed zeros.
TEST(GgmlMath, BlockPathsEqualScalarLanes) {
  std::vector<float> x;
  for (float v = -120.0f; v <= 120.0f; v += 0.00731f) x.push_back(v);
  for (float v : {0.0f, -0.0f, -87.5f, -88.7f, -95.0f, -103.9f, 88.7f, 133.0f, 134.0f, -134.0f,
                  1e-30f, -1e-30f, 3e38f, -3e38f})
    x.push_back(v);
  while (x.size() % 16 != 0) x.push_back(0.5f);
  std::vector<float> up(x.size()), out(x.size()), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) up[i] = 0.25f + 0.001f * static_cast<float>(i % 97);
  swiglu_ggml(x.data(), up.data(), static_cast<int64_t>(x.size()), out.data());
  const float max = 1.5f;
  const double sum = softmax_exp_sum_ggml(x.data(), max, static_cast<int64_t>(x.size()), y.data());
  double ref_sum = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float silu = silu_ggml(x[i]) * up[i];
    ASSERT_EQ(std::memcmp(&out[i], &silu, 4), 0) << "swiglu at " << x[i];
    const float e = expf_ggml(x[i] - max);
    ASSERT_EQ(std::memcmp(&y[i], &e, 4), 0) << "exp at " << x[i];
    if (i % 16 == 15) {  // the reduce-add order of one block
      const float* b = &y[i - 15];
      float t8[8], t4[4];
      for (int l = 0; l < 8; ++l) t8[l] = b[l + 8] + b[l];
      for (int l = 0; l < 4; ++l) t4[l] = t8[l + 4] + t8[l];
      ref_sum += static_cast<double>((t4[0] + t4[2]) + (t4[1] + t4[3]));
    }
  }
  EXPECT_EQ(sum, ref_sum);
}

// The activation quantizers: Q8_0 / Q8_1 round x * (127 / amax) to nearest even and store
// d = f16(amax / 127); Q8_K stores d = 1 / (-127 / max) with max the signed value of largest
// magnitude, and bsums.
TEST(ActivationQuant, Q8_0RoundsHalfToEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // amax: id = 1
  x[1] = 2.5f;    // tie: 2 (away from zero would give 3)
  x[2] = -3.5f;   // tie: -4
  x[3] = 1.49f;
  BlockQ8_0 q;
  quantize_activation_row(GgmlType::Q8_0, x.data(), &q, 32);
  EXPECT_EQ(fp16_to_fp32(q.d), 1.0f);
  EXPECT_EQ(q.qs[0], 127);
  EXPECT_EQ(q.qs[1], 2);
  EXPECT_EQ(q.qs[2], -4);
  EXPECT_EQ(q.qs[3], 1);
}

TEST(ActivationQuant, Q8_1StoresScaledSum) {
  std::vector<float> x(32, 1.0f);
  x[0] = -127.0f;
  std::vector<uint8_t> q(36);
  quantize_activation_row(GgmlType::Q8_1, x.data(), q.data(), 32);
  uint16_t d, s;
  std::memcpy(&d, q.data(), 2);
  std::memcpy(&s, q.data() + 2, 2);
  EXPECT_EQ(fp16_to_fp32(d), 1.0f);
  EXPECT_EQ(fp16_to_fp32(s), -127.0f + 31.0f);
}

TEST(ActivationQuant, Q8_KUsesSignedMaxAndBsums) {
  std::vector<float> x(256, 0.5f);
  x[7] = -2.0f;  // largest magnitude, negative: iscale = 63.5, d = 1 / 63.5
  BlockQ8_K q;
  quantize_activation_row(GgmlType::Q8_K, x.data(), &q, 256);
  EXPECT_EQ(q.d, 1.0f / (-127.0f / -2.0f));
  EXPECT_EQ(q.qs[7], -127);
  EXPECT_EQ(q.qs[0], 32);  // 31.75 -> 32
  EXPECT_EQ(q.bsums[0], 15 * 32 - 127);
  EXPECT_EQ(q.bsums[1], 16 * 32);
}

// Attention's weighted sum of V rows equals a column-by-column dot_f16_ggml over the padded length.
TEST(FloatDots, WeightedRowsEqualColumnDotsBitwise) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t dim = 64;
  for (int64_t n : {1, 7, 63, 64, 65, 200}) {
    const int64_t n_pad = (n + 63) / 64 * 64;
    std::vector<std::vector<uint16_t>> v(n, std::vector<uint16_t>(dim));
    std::vector<const uint16_t*> rows;
    for (auto& row : v) {
      for (auto& x : row) x = fp32_to_fp16(g(rng));
      rows.push_back(row.data());
    }
    std::vector<uint16_t> probs(n_pad, 0);
    for (int64_t p = 0; p < n; ++p) probs[p] = fp32_to_fp16(std::fabs(g(rng)) / n);
    std::vector<float> out(dim), scratch(64 * dim);
    weighted_rows_f16_ggml(rows.data(), probs.data(), n, dim, out.data(), scratch.data());
    for (int64_t i = 0; i < dim; ++i) {
      std::vector<uint16_t> col(n_pad, 0);
      for (int64_t p = 0; p < n; ++p) col[p] = v[p][i];
      const float want = dot_f16_ggml(col.data(), probs.data(), n_pad);
      ASSERT_EQ(std::memcmp(&out[i], &want, 4), 0) << "n=" << n << " i=" << i;
    }
  }
}

// --- BF16: vdpbf16ps emulated in scalar code (dot_bf16's lane step) ------------------------------

// Bf16 bit patterns that reach every path of the lane step: ordinary values, values whose
// products land around the smallest normal (2^-126, where FTZ acts), subnormals (DAZ), signed
// zeros and large magnitudes.
[[maybe_unused]] uint16_t edge_bf16(std::mt19937& rng) {
  const uint32_t r = rng();
  const uint32_t sign = r & 0x8000u, mant = (r >> 1) & 0x7fu;
  uint32_t exp;
  switch ((r >> 8) % 8) {
    case 0:
      return static_cast<uint16_t>(sign);  // +-0
    case 1:
      exp = 0;
      break;  // subnormal (or zero)
    case 2:
      exp = 1 + (r >> 16) % 6;
      break;  // smallest normals
    case 3:
    case 4:
      exp = 58 + (r >> 16) % 12;
      break;  // products near 2^-126
    case 5:
      exp = 150 + (r >> 16) % 40;
      break;  // large
    default:
      exp = 120 + (r >> 16) % 14;
      break;  // ordinary
  }
  return static_cast<uint16_t>(sign | exp << 7 | mant);
}

// Accumulators: the same classes in fp32, with subnormal fp32 values among them.
[[maybe_unused]] float edge_fp32(std::mt19937& rng) {
  const uint32_t r = rng(), m = rng() & 0x7fffffu, sign = r & 0x80000000u;
  uint32_t exp;
  switch (r % 6) {
    case 0:
      return std::bit_cast<float>(sign);
    case 1:
      exp = 0;
      break;
    case 2:
      exp = 1 + (r >> 8) % 4;
      break;
    case 3:
      exp = 30 + (r >> 8) % 100;
      break;
    default:
      exp = 110 + (r >> 8) % 30;
      break;
  }
  return std::bit_cast<float>(sign | exp << 23 | m);
}

[[maybe_unused]] bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) ||
         std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// The lane step on documented cases: odd pair first, each step one rounding, FTZ after rounding.
TEST(Bf16Lane, DocumentedOrderAndFlushes) {
  const auto pair = [](float even, float odd) {
    return static_cast<uint32_t>(fp32_to_bf16(even)) | static_cast<uint32_t>(fp32_to_bf16(odd))
                                                           << 16;
  };
  // 1 + 2^-24 (odd first: rounds to 1), then + 2^-24 again: 1 (ties to even), not 1 + 2^-23.
  EXPECT_EQ(vdpbf16ps_lane(1.0f, pair(0x1p-24f, 0x1p-24f), pair(1.0f, 1.0f)), 1.0f);
  // Order: acc = 2^24, odd product -2^24, then even 1: exactly 1. Even first would give 0.
  EXPECT_EQ(vdpbf16ps_lane(0x1p24f, pair(1.0f, -0x1p24f), pair(1.0f, 1.0f)), 1.0f);
  // A subnormal bf16 input reads as zero.
  const uint32_t sub = 0x0040u;  // bf16 2^-127 (subnormal)
  EXPECT_EQ(vdpbf16ps_lane(0.0f, sub, pair(0x1p100f, 0.0f)), 0.0f);
  // A subnormal accumulator reads as zero; a subnormal result is flushed to a signed zero.
  EXPECT_EQ(vdpbf16ps_lane(0x1p-130f, pair(1.0f, 0.0f), pair(0x1p-120f, 0.0f)), 0x1p-120f);
  EXPECT_EQ(
      std::bit_cast<uint32_t>(vdpbf16ps_lane(0.0f, pair(-0x1p-70f, 0.0f), pair(0x1p-60f, 0.0f))),
      0x80000000u);
  // 2^-126 - 2^-151 rounds up to the smallest normal, which is kept (tininess after rounding).
  EXPECT_EQ(vdpbf16ps_lane(0x1p-126f, pair(0x1p-75f, 0.0f), pair(-0x1p-76f, 0.0f)), 0x1p-126f);
}

#if defined(__x86_64__)
// GCC 12's AVX-512 intrinsics read a deliberately undefined register (as in the kernels).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f,avx512bf16"))) void vdpbf16ps16(const float* acc, const uint16_t* a,
                                                               const uint16_t* b, float* out) {
  const __m512 r = _mm512_dpbf16_ps(_mm512_loadu_ps(acc), (__m512bh)_mm512_loadu_si512(a),
                                    (__m512bh)_mm512_loadu_si512(b));
  _mm512_storeu_ps(out, r);
}

// tinyBLAS's AVX512BF16 structure written with the instruction itself (one accumulator over runs
// of 32, GCC's _mm512_reduce_add_ps, in float), leftovers loaded with zeros beyond the row.
__attribute__((target("avx512f,avx512bw,avx512bf16"))) float tinyblas_structure_dot_bf16(
    const uint16_t* w, const uint16_t* x, int64_t n) {
  __m512 c = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 32) {
    const __mmask32 m =
        n - i >= 32 ? ~__mmask32{0} : static_cast<__mmask32>((uint64_t{1} << (n - i)) - 1);
    c = _mm512_dpbf16_ps(c, (__m512bh)_mm512_maskz_loadu_epi16(m, w + i),
                         (__m512bh)_mm512_maskz_loadu_epi16(m, x + i));
  }
  return _mm512_reduce_add_ps(c);
}
#pragma GCC diagnostic pop

// The scalar lane step equals the real instruction bit for bit on edge values.
TEST(Bf16Lane, EqualsVdpbf16psOnThisCpu) {
  if (!cpu_features().avx512bf16) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  std::mt19937 rng(2024);
  int64_t flushed = 0;
  for (int it = 0; it < 100000; ++it) {
    float acc[16], out[16];
    uint16_t a[32], b[32];
    for (float& v : acc) v = edge_fp32(rng);
    for (int j = 0; j < 32; ++j) {
      a[j] = edge_bf16(rng);
      b[j] = edge_bf16(rng);
    }
    vdpbf16ps16(acc, a, b, out);
    for (int j = 0; j < 16; ++j) {
      const uint32_t ap = a[2 * j] | static_cast<uint32_t>(a[2 * j + 1]) << 16;
      const uint32_t bp = b[2 * j] | static_cast<uint32_t>(b[2 * j + 1]) << 16;
      const float want = vdpbf16ps_lane(acc[j], ap, bp);
      ASSERT_TRUE(same_float(out[j], want))
          << std::hexfloat << "acc " << acc[j] << " a " << bf16_to_fp32(a[2 * j]) << ", "
          << bf16_to_fp32(a[2 * j + 1]) << " b " << bf16_to_fp32(b[2 * j]) << ", "
          << bf16_to_fp32(b[2 * j + 1]) << ": instruction " << out[j] << " emulation " << want;
      flushed += out[j] == 0.0f && acc[j] != 0.0f;
    }
  }
  EXPECT_GT(flushed, 1000);  // the data does reach the zero / flush paths
}

// dot_bf16 equals tinyBLAS's structure run on the instruction, leftovers included.
TEST(Bf16Dot, EqualsTinyBlasStructureOnThisCpu) {
  if (!cpu_features().avx512bf16) GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 1.0f);
  for (int64_t n : {1, 31, 32, 64, 100, 200, 1536, 8960}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<uint16_t> w(static_cast<size_t>(n)), x(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        w[i] = trial % 2 ? edge_bf16(rng) : fp32_to_bf16(gauss(rng));
        x[i] = trial % 2 ? edge_bf16(rng) : fp32_to_bf16(gauss(rng) * 3.0f);
      }
      const float want = tinyblas_structure_dot_bf16(w.data(), x.data(), n);
      ASSERT_TRUE(same_float(dot_bf16(w.data(), x.data(), n), want))
          << "n=" << n << " trial " << trial << ": " << dot_bf16(w.data(), x.data(), n) << " vs "
          << want;
    }
  }
}
#endif

}  // namespace
}  // namespace ponder
