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
#include "kernels/weight_prefetch.h"
#include "kernels/x16_test_support.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

struct Case {
  GgmlType type;
  Isa isa;
};

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return std::string(ggml_type_name(info.param.type)) + "_" + isa_name(info.param.isa);
}

// Random weights [n_out, n_in] quantized to `type`, plus codes files may hold though our quantizer
// never writes them: random Q4_K / Q5_K scale bytes, extreme Q6_K scales, Q8_0 -128.
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
  if (type == GgmlType::Q4_K || type == GgmlType::Q5_K) {  // every bit of the packed scales and
    std::uniform_int_distribution<int> byte(0, 255);       // mins, not just likely ones
    auto randomize_scales = [&](auto* blocks) {
      for (int64_t b = 0; b < n_out * n_in / kQK_K; b += 3) {
        for (uint8_t& s : blocks[b].scales) s = static_cast<uint8_t>(byte(rng));
      }
    };
    if (type == GgmlType::Q4_K) {
      randomize_scales(reinterpret_cast<BlockQ4_K*>(w.data()));
    } else {
      randomize_scales(reinterpret_cast<BlockQ5_K*>(w.data()));
    }
  }
  if (type == GgmlType::Q2_K || type == GgmlType::Q3_K) {  // every scale (and Q2_K min) code
    std::uniform_int_distribution<int> byte(0, 255);
    for (int64_t b = 0; b < n_out * n_in / kQK_K; b += 3) {
      uint8_t* scales = type == GgmlType::Q2_K ? reinterpret_cast<BlockQ2_K*>(w.data())[b].scales
                                               : reinterpret_cast<BlockQ3_K*>(w.data())[b].scales;
      const int n = type == GgmlType::Q2_K ? 16 : 12;
      for (int i = 0; i < n; ++i) scales[i] = static_cast<uint8_t>(byte(rng));
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

// Runs the reference and kernel k on the same rows; succeeds when every output has the same bits.
// The kernel's outputs go to *y when given.
testing::AssertionResult same_bits_as_reference(const MatmulKernel& ref, const MatmulKernel& k,
                                                const WeightView& w, const float* x, int64_t n_rows,
                                                std::vector<float>* y = nullptr) {
  std::vector<float> y_ref(static_cast<size_t>(n_rows * w.n_out), NAN), y_k(y_ref.size(), NAN);
  run_kernel(ref, w, x, n_rows, 0, w.n_out, y_ref.data());
  run_kernel(k, w, x, n_rows, 0, w.n_out, y_k.data());
  for (size_t e = 0; e < y_k.size(); ++e) {
    if (std::memcmp(&y_k[e], &y_ref[e], sizeof(float)) != 0) {
      return testing::AssertionFailure() << "row " << e / w.n_out << " out " << e % w.n_out << ": "
                                         << y_k[e] << " vs " << y_ref[e];
    }
  }
  if (y != nullptr) *y = std::move(y_k);
  return testing::AssertionSuccess();
}

// The (type, ISA) cases of every type with every ISA.
std::vector<Case> cases_of(std::initializer_list<GgmlType> types, std::initializer_list<Isa> isas) {
  std::vector<Case> cases;
  for (GgmlType t : types) {
    for (Isa isa : isas) cases.push_back({t, isa});
  }
  return cases;
}

// A (type, ISA) case's kernel as Find gives it and Find's scalar reference for the type; the test
// is skipped where this CPU has no kernel of that ISA for the type.
template <const MatmulKernel* (*Find)(GgmlType, Isa)>
class KernelCaseTest : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    kernel_ = Find(GetParam().type, GetParam().isa);
    if (kernel_ == nullptr || kernel_->isa != GetParam().isa)
      GTEST_SKIP() << "no " << isa_name(GetParam().isa) << " kernel for this type on this CPU";
    reference_ = Find(GetParam().type, Isa::kScalar);
    ASSERT_NE(reference_, nullptr);
  }
  const MatmulKernel* kernel() const { return kernel_; }
  const MatmulKernel* reference() const { return reference_; }
  // same_bits_as_reference for this case's kernel.
  testing::AssertionResult same_bits(const WeightView& w, const float* x, int64_t n_rows,
                                     std::vector<float>* y = nullptr) const {
    return same_bits_as_reference(*reference_, *kernel_, w, x, n_rows, y);
  }

 private:
  const MatmulKernel* kernel_ = nullptr;
  const MatmulKernel* reference_ = nullptr;
};

class SimdKernelTest : public KernelCaseTest<find_matmul_kernel> {};

TEST_P(SimdKernelTest, BitwiseEqualToScalarReference) {
  const MatmulKernel* k = kernel();
  std::mt19937 rng(77 + static_cast<unsigned>(GetParam().type));
  struct Shape {
    int64_t n_in, n_out, n_rows;
  };
  std::vector<Shape> shapes = {{256, 1, 1},  {256, 37, 5},  {512, 3, 37},  {768, 17, 1},
                               {1536, 9, 4}, {1536, 64, 7}, {2304, 5, 13}, {8960, 7, 3},
                               {8960, 2, 1}, {4096, 33, 9}};
  if (GetParam().type == GgmlType::Q4_0 || GetParam().type == GgmlType::Q4_1 ||
      GetParam().type == GgmlType::Q5_0 || GetParam().type == GgmlType::Q5_1) {
    // Rows of blocks that are no whole super-block, more outputs than one cache block of the
    // legacy kernels (64) and activation tiles of every size.
    shapes.insert(shapes.end(), {{96, 5, 2}, {32, 17, 3}, {1536, 150, 17}, {8960, 19, 8}});
  }
  // Rows that are not whole runs of 64 or 16.
  if (GetParam().type == GgmlType::F16 || GetParam().type == GgmlType::BF16) {
    shapes.insert(shapes.end(), {{200, 5, 3}, {208, 7, 1}, {208, 7, 6}, {16, 3, 2}});
  }
  for (const Shape& s : shapes) {
    SCOPED_TRACE(testing::Message()
                 << "n_in " << s.n_in << " n_out " << s.n_out << " n_rows " << s.n_rows);
    const std::vector<uint8_t> wq = random_weights(GetParam().type, s.n_in, s.n_out, rng);
    const WeightView w{GetParam().type, wq.data(), s.n_in, s.n_out};
    const std::vector<float> x = random_activations(s.n_in, s.n_rows, rng);
    std::vector<float> y;
    ASSERT_TRUE(same_bits(w, x.data(), s.n_rows, &y));
    // The reference kernel is the row dot itself.
    const RowDotFn dot = row_dot_function(GetParam().type);
    std::vector<uint8_t> xq(
        static_cast<size_t>(ggml_row_bytes(dot_activation_type(GetParam().type), s.n_in)));
    quantize_activation_row(dot_activation_type(GetParam().type), x.data(), xq.data(), s.n_in);
    EXPECT_EQ(dot(wq.data(), xq.data(), s.n_in), y[0]);

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
  return cases_of({GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16,
                   GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                   GgmlType::Q3_K},
                  {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512});
}

INSTANTIATE_TEST_SUITE_P(AllKernels, SimdKernelTest, testing::ValuesIn(all_cases()), case_name);

// Legacy types (Q4_0, Q4_1, Q5_0, Q5_1) and Q2_K / Q3_K with every quant and scale at its
// smallest or largest code, block by block, against activations of largest magnitude and one sign:
// the kernels keep 16-bit sums of up to 16 products (Q4_0) or 2 (the others), which come closest
// to saturating here.
class LegacyExtremeTest : public KernelCaseTest<find_matmul_kernel> {};

std::vector<uint8_t> extreme_legacy_weights(GgmlType type, int64_t n_in, int64_t n_out) {
  constexpr uint16_t kOne = 0x3C00;  // f16 1.0
  const bool k_type = type == GgmlType::Q2_K || type == GgmlType::Q3_K;
  const int64_t block_bytes = ggml_row_bytes(type, k_type ? kQK_K : kQK);
  const int64_t nb = n_in * n_out / (k_type ? kQK_K : kQK);
  std::vector<uint8_t> w(static_cast<size_t>(block_bytes * nb));
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t* blk = w.data() + b * block_bytes;
    const uint8_t fill = b % 3 == 0 ? 0x00 : (b % 3 == 1 ? 0xFF : 0xF0);
    std::memset(blk, fill, static_cast<size_t>(block_bytes));
    if (type == GgmlType::Q2_K) {
      BlockQ2_K* q = reinterpret_cast<BlockQ2_K*>(blk);
      q->d = q->dmin = kOne;
    } else if (type == GgmlType::Q3_K) {
      reinterpret_cast<BlockQ3_K*>(blk)->d = kOne;
    } else {
      std::memcpy(blk, &kOne, 2);  // d, then Q4_1 / Q5_1's m
      if (type == GgmlType::Q4_1 || type == GgmlType::Q5_1) std::memcpy(blk + 2, &kOne, 2);
    }
  }
  return w;
}

TEST_P(LegacyExtremeTest, ExtremeCodesDoNotSaturate) {
  const int64_t n_in = 512, n_out = 19, n_rows = 5;
  const std::vector<uint8_t> wq = extreme_legacy_weights(GetParam().type, n_in, n_out);
  const WeightView w{GetParam().type, wq.data(), n_in, n_out};
  // Rows of +1, of -1, alternating signs, +1 after one -1, and +1 with every other block -1.
  std::vector<float> x(static_cast<size_t>(n_in * n_rows), 1.0f);
  for (int64_t i = 0; i < n_in; ++i) {
    x[n_in + i] = -1.0f;
    x[2 * n_in + i] = i % 2 == 0 ? 1.0f : -1.0f;
    x[4 * n_in + i] = (i / kQK) % 2 == 0 ? 1.0f : -1.0f;
  }
  x[3 * n_in] = -1.0f;
  EXPECT_TRUE(same_bits(w, x.data(), n_rows));
}

std::vector<Case> legacy_cases() {
  return cases_of({GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q2_K,
                   GgmlType::Q3_K},
                  {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512});
}

INSTANTIATE_TEST_SUITE_P(Legacy, LegacyExtremeTest, testing::ValuesIn(legacy_cases()), case_name);

// BF16 weights and activations whose products and sums pass through the subnormal range, with
// subnormal bf16 weights, signed zeros and tiny activations: vdpbf16ps's DAZ / FTZ steps (and the
// AVX2 emulation of them) must match the scalar reference, alone and in batches.
class Bf16KernelTest : public testing::TestWithParam<Isa> {};

TEST_P(Bf16KernelTest, SubnormalRangeBitwiseEqualToScalarReference) {
  const MatmulKernel* k = find_matmul_kernel(GgmlType::BF16, GetParam());
  if (k == nullptr || k->isa != GetParam())
    GTEST_SKIP() << "no " << isa_name(GetParam()) << " BF16 kernel on this CPU";
  const MatmulKernel* ref = find_matmul_kernel(GgmlType::BF16, Isa::kScalar);
  std::mt19937 rng(4242);
  const auto edge_bits = [&](uint32_t exp_lo, uint32_t exp_span) -> uint32_t {
    const uint32_t r = static_cast<uint32_t>(rng());
    if (r % 11 == 0) return r & 0x80000000u;                             // +-0
    const uint32_t exp = r % 7 == 0 ? 0 : exp_lo + (r >> 8) % exp_span;  // subnormal or not
    return (r & 0x80000000u) | exp << 23 | (static_cast<uint32_t>(rng()) & 0x7fffffu);
  };
  // Biased exponent ranges {first, count} of weights and activations, zeros and subnormals mixed
  // in: products around 2^-126 (the FTZ of each step); subnormal weights times large activations
  // (DAZ of the weights: read as zero, else the products would be normal); the converse.
  struct Regime {
    uint32_t w_exp[2], x_exp[2];
  };
  const Regime regimes[] = {{{56, 16}, {56, 16}}, {{1, 10}, {180, 20}}, {{180, 20}, {1, 10}}};
  for (const Regime& g : regimes) {
    for (int64_t n_in : {64, 200, 1536}) {
      SCOPED_TRACE(testing::Message()
                   << "weight exponents from " << g.w_exp[0] << ", n_in " << n_in);
      const int64_t n_out = 9, n_rows = 5;
      std::vector<uint16_t> wq(static_cast<size_t>(n_in * n_out));
      for (uint16_t& v : wq) v = static_cast<uint16_t>(edge_bits(g.w_exp[0], g.w_exp[1]) >> 16);
      std::vector<float> x(static_cast<size_t>(n_in * n_rows));
      for (float& v : x) {
        const uint32_t b = edge_bits(g.x_exp[0], g.x_exp[1]);
        std::memcpy(&v, &b, sizeof(v));
      }
      const WeightView w{GgmlType::BF16, wq.data(), n_in, n_out};
      std::vector<float> y;
      ASSERT_TRUE(same_bits_as_reference(*ref, *k, w, x.data(), n_rows, &y));
      const int zeros = static_cast<int>(std::count(y.begin(), y.end(), 0.0f));
      EXPECT_LT(zeros, n_rows * n_out) << "the data should not flush every output";
      for (int64_t r = 0; r < n_rows; ++r) {
        std::vector<float> y_alone(static_cast<size_t>(n_out));
        run_kernel(*k, w, x.data() + r * n_in, 1, 0, n_out, y_alone.data());
        EXPECT_EQ(std::memcmp(y_alone.data(), y.data() + r * n_out, n_out * sizeof(float)), 0)
            << "row " << r;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Bf16Kernels, Bf16KernelTest, testing::Values(Isa::kAvx2, Isa::kAvx512),
                         [](const testing::TestParamInfo<Isa>& info) {
                           return std::string(isa_name(info.param));
                         });

// --- x16 layout kernels (kernels/interleave.h) ---------------------------------------------------

// Each x16 SIMD kernel (AVX2, AVX-VNNI, AVX-512, NEON) the CPU can run, whichever one active_isa()
// would pick; the others skip (scripts/cross_arm64.sh runs the NEON ones under qemu).
class X16KernelTest : public KernelCaseTest<find_x16_matmul_kernel> {};

TEST_P(X16KernelTest, SimdOnInterleavedRowsEqualsScalarX16Order) {
  const GgmlType type = GetParam().type;
  const MatmulKernel* k = kernel();
  const MatmulKernel* ref = reference();
  ASSERT_TRUE(ref->x16 && k->x16);
  std::mt19937 rng(5 + static_cast<unsigned>(type));
  struct Shape {
    int64_t n_in, n_out, n_rows;
  };
  for (const Shape& s : std::vector<Shape>{{256, 16, 1},
                                           {256, 48, 5},
                                           {1536, 32, 1},
                                           {1536, 64, 9},
                                           {512, 16, 4},
                                           {8960, 16, 3},
                                           {2304, 32, 13},
                                           {512, 80, 17}}) {
    SCOPED_TRACE(testing::Message()
                 << "n_in " << s.n_in << " n_out " << s.n_out << " n_rows " << s.n_rows);
    const std::vector<uint8_t> wq = random_weights(type, s.n_in, s.n_out, rng);
    WeightView w{type, wq.data(), s.n_in, s.n_out};
    ASSERT_TRUE(x16_supported(w.type, w.n_out, w.n_in));
    AlignedBuffer x16 = interleaved(w);
    w.x16 = x16.data();
    const std::vector<float> x = random_activations(s.n_in, s.n_rows, rng);
    std::vector<float> y;
    ASSERT_TRUE(same_bits(w, x.data(), s.n_rows, &y));
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
    // Without the weight stream's prefetches (kernels/weight_prefetch.h): the same bits.
    set_weight_prefetch(false);
    std::vector<float> y_plain(static_cast<size_t>(s.n_out));
    run_kernel(*k, w, x.data(), 1, 0, s.n_out, y_plain.data());
    set_weight_prefetch(true);
    EXPECT_EQ(std::memcmp(y_plain.data(), y.data(), s.n_out * sizeof(float)), 0);
  }
}

// Every weight at its largest code (Q4_K 15 and Q5_K 31 with scales and mins 63, Q6_K 63 with
// scales -128 and 127, Q8_0 -128) against activations of largest magnitude and one sign: the int16
// sums of the kernels without 32-bit dot products come closest to saturating here.
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
    } else if (type == GgmlType::Q5_K) {
      BlockQ5_K& q = reinterpret_cast<BlockQ5_K*>(w.data())[b];
      q.d = q.dmin = kOne;
      std::memset(q.scales, 0xFF, sizeof(q.scales));
      std::memset(q.qh, 0xFF, sizeof(q.qh));
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
  EXPECT_TRUE(same_bits(w, x.data(), n_rows));
}

std::vector<Case> x16_cases() {
  return cases_of({GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0},
                  {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kNeon});
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
                       : GetParam() == GgmlType::Q5_K ? dot_q5_K_x16_order
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

INSTANTIATE_TEST_SUITE_P(X16, X16OrderTest,
                         testing::Values(GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                         GgmlType::Q8_0),
                         [](const testing::TestParamInfo<GgmlType>& info) {
                           return std::string(ggml_type_name(info.param));
                         });

TEST(KernelTableTest, FallsBackToScalarAndKnowsNoDotTypes) {
  const MatmulKernel* k = find_matmul_kernel(GgmlType::Q5_K, Isa::kAvx512);
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->isa, Isa::kScalar);
  EXPECT_EQ(find_matmul_kernel(GgmlType::Q8_K, Isa::kScalar), nullptr);
  ASSERT_NE(active_matmul_kernel(GgmlType::Q4_K), nullptr);
}

// A type with an x16 layout but no SIMD kernel for an ISA (Q5_K has none for NEON, nor any type
// for the scalar ISA) gets the scalar x16-order kernel, which reads the ggml rows.
TEST(KernelTableTest, X16FallsBackToTheScalarX16Order) {
  for (Isa isa : {Isa::kScalar, Isa::kNeon}) {
    const MatmulKernel* k = find_x16_matmul_kernel(GgmlType::Q5_K, isa);
    ASSERT_NE(k, nullptr) << isa_name(isa);
    EXPECT_TRUE(k->x16) << isa_name(isa);
    if (isa == Isa::kScalar || !isa_supported(isa)) {
      EXPECT_EQ(k->isa, Isa::kScalar) << isa_name(isa);
    }
  }
  // No copy is worth making for the scalar kernel (it reads the ggml rows).
  EXPECT_EQ(x16_kernel_available(GgmlType::Q5_K),
            find_x16_matmul_kernel(GgmlType::Q5_K, active_isa())->isa != Isa::kScalar);
  EXPECT_EQ(find_x16_matmul_kernel(GgmlType::Q3_K, Isa::kScalar), nullptr);
  EXPECT_FALSE(x16_supported(GgmlType::Q3_K, 16, 256));
}

// The Q5_K copy holds every code, scale, min and f16 scale where interleave.h says: the weights
// rebuilt from it equal the ggml dequantization bit for bit.
TEST(X16LayoutTest, Q5KCopyHoldsEveryWeight) {
  std::mt19937 rng(23);
  const int64_t n_in = 512, n_out = 32, nb = n_in / kQK_K;
  const std::vector<uint8_t> wq = random_weights(GgmlType::Q5_K, n_in, n_out, rng);
  WeightView w{GgmlType::Q5_K, wq.data(), n_in, n_out};
  ASSERT_TRUE(x16_supported(w.type, w.n_out, w.n_in));
  ASSERT_EQ(x16_bytes(w), n_out / kX16Rows * nb * static_cast<int64_t>(sizeof(BlockQ5KX16)));
  AlignedBuffer x16 = interleaved(w);
  const BlockQ5KX16* blocks = reinterpret_cast<const BlockQ5KX16*>(x16.data());
  std::vector<float> ref(static_cast<size_t>(n_in));
  for (int64_t o = 0; o < n_out; ++o) {
    dequantize_row(w.type, w.row(o), ref.data(), n_in);
    const int j = static_cast<int>(o % kX16Rows);
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ5KX16& xb = blocks[(o / kX16Rows) * nb + b];
      const float d = fp16_to_fp32(xb.d[j]), dmin = fp16_to_fp32(xb.dmin[j]);
      for (int e = 0; e < kQK_K; ++e) {
        const int p = e / 64, h = e % 64 / 32, l = e % 32 / 4, t = e % 4, c = 2 * p + h;
        const int code =
            ((xb.q[l][p][j][t] >> (4 * h)) & 0xF) | (((xb.q[l][4][j][t] >> c) & 1) << 4);
        const float v = d * xb.scales[c][j] * code - dmin * xb.mins[p][j][h];
        ASSERT_EQ(std::memcmp(&v, &ref[b * kQK_K + e], sizeof(float)), 0)
            << "row " << o << " element " << b * kQK_K + e << ": " << v << " vs "
            << ref[b * kQK_K + e];
      }
    }
  }
}

}  // namespace
}  // namespace ponder
