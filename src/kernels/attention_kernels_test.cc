#include "kernels/attention_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/half.h"

namespace ponder {
namespace {

// n f16 rows of dim normal values, and n f16 weights of about 1 / n.
struct RandomRows {
  std::vector<std::vector<uint16_t>> v;
  std::vector<const uint16_t*> rows;
  std::vector<uint16_t> probs;
  RandomRows(int64_t n, int64_t dim, std::mt19937& rng, std::normal_distribution<float>& g)
      : v(n, std::vector<uint16_t>(dim)), probs(n) {
    for (auto& row : v) {
      for (auto& e : row) e = fp32_to_fp16(g(rng));
      rows.push_back(row.data());
    }
    for (auto& p : probs) p = fp32_to_fp16(std::fabs(g(rng)) / static_cast<float>(n));
  }
};

// The weighted sum in two steps (lane accumulators over position ranges, then the fold) gives
// weighted_rows_f16's bits whatever the split of [0, n), for the scalar and the AVX-512 kernels.
TEST(AttentionKernelsTest, AccumulatedLanesEqualTheWeightedSum) {
  std::vector<const AttentionKernels*> kernels = {&attention_kernels_scalar()};
  if (attention_kernels_avx512() != nullptr) kernels.push_back(attention_kernels_avx512());
  const AttentionKernels& ref = attention_kernels_scalar();
  std::mt19937 rng(23);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t dim : {128, 40}) {
    for (int64_t n : {1, 63, 64, 200, 1100}) {
      const RandomRows r(n, dim, rng, g);
      const auto& [v, rows, probs] = r;
      std::vector<float> want(dim), scratch(64 * dim);
      ref.weighted_rows_f16(rows.data(), probs.data(), n, dim, want.data(), scratch.data());
      for (const AttentionKernels* k : kernels) {
        for (int64_t split : {int64_t{0}, n / 3, n - 1, int64_t{512}}) {
          if (split > n) continue;
          std::vector<float> acc(64 * dim, 0.0f), got(dim, NAN);
          k->accumulate_rows_f16(rows.data(), probs.data(), 0, split, dim, acc.data());
          k->accumulate_rows_f16(rows.data(), probs.data(), split, n, dim, acc.data());
          k->reduce_lanes_f16(acc.data(), dim, got.data());
          ASSERT_EQ(std::memcmp(got.data(), want.data(), 4 * dim), 0)
              << "dim " << dim << " n " << n << " split " << split
              << (k == &ref ? " scalar" : " avx512");
        }
      }
    }
  }
}

// Every attention kernel the CPU supports gives the scalar reference's bits.
TEST(AttentionKernelsTest, Avx512IsBitwiseTheReference) {
  const AttentionKernels* simd = attention_kernels_avx512();
  if (simd == nullptr) GTEST_SKIP() << "no AVX-512 on this CPU";
  const AttentionKernels& ref = attention_kernels_scalar();
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t n : {1, 5, 63, 64, 65, 130, 700}) {
    std::vector<uint16_t> x(n), y(n);
    for (int64_t i = 0; i < n; ++i) {
      x[i] = fp32_to_fp16(g(rng));
      y[i] = fp32_to_fp16(g(rng));
    }
    const float a = ref.dot_f16(x.data(), y.data(), n);
    const float b = simd->dot_f16(x.data(), y.data(), n);
    ASSERT_EQ(std::memcmp(&a, &b, 4), 0) << "dot n=" << n << ": " << a << " vs " << b;
  }
  for (int64_t dim : {64, 128, 40}) {
    for (int64_t n : {1, 17, 64, 100, 300}) {
      const RandomRows r(n, dim, rng, g);
      const auto& [v, rows, probs] = r;
      std::vector<float> out_ref(dim), out_simd(dim), scratch(64 * dim);
      ref.weighted_rows_f16(rows.data(), probs.data(), n, dim, out_ref.data(), scratch.data());
      simd->weighted_rows_f16(rows.data(), probs.data(), n, dim, out_simd.data(), scratch.data());
      ASSERT_EQ(std::memcmp(out_ref.data(), out_simd.data(), dim * 4), 0)
          << "dim=" << dim << " n=" << n;
    }
  }
  // Several heads against one row.
  for (int64_t n : {64, 128, 100}) {
    for (int heads : {1, 3, 6, 7}) {
      std::vector<uint16_t> x(n), y(n * heads);
      for (auto& e : x) e = fp32_to_fp16(g(rng));
      for (auto& e : y) e = fp32_to_fp16(g(rng));
      std::vector<float> a(heads), b(heads);
      ref.dot_f16_heads(x.data(), y.data(), heads, n, a.data());
      simd->dot_f16_heads(x.data(), y.data(), heads, n, b.data());
      ASSERT_EQ(std::memcmp(a.data(), b.data(), 4 * heads), 0) << "heads " << heads << " n " << n;
      for (int h = 0; h < heads; ++h) EXPECT_EQ(a[h], ref.dot_f16(x.data(), y.data() + h * n, n));
    }
  }
  // Rounding to f16: ties, values past f16's range, subnormal results, zeros, infinities.
  std::vector<float> x = {0.0f,          -0.0f,          65504.0f, 65520.0f, 1e6f,
                          -1e6f,         6e-8f,          3e-8f,    2.98e-8f, 1e-10f,
                          1.0009765625f, 1.00048828125f, INFINITY, -INFINITY};
  for (int i = 0; i < 1000; ++i) x.push_back(g(rng) * std::exp(4.0f * g(rng)));
  for (float scale : {1.0f, 0.37f, 1e-3f}) {
    std::vector<uint16_t> a(x.size()), b(x.size());
    ref.scaled_to_f16(x.data(), scale, a.data(), static_cast<int64_t>(x.size()));
    simd->scaled_to_f16(x.data(), scale, b.data(), static_cast<int64_t>(x.size()));
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(a[i], b[i]) << x[i] << " * " << scale;
  }
}

}  // namespace
}  // namespace ponder
