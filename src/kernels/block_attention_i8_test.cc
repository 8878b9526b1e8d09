// The int8-scores variant of the block order (block_attention.h): K's codes transposed as the
// header says, every ISA's kernels give the scalar reference's bits, and the reference is softmax
// attention over the Q8_0 query and K (against a double-precision computation).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_attention.h"
#include "kernels/block_attention_test_support.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

using namespace block_attention_test;

// n_q query vectors rounded to Q8_0, with their blocks' code sums (what attention.cc passes).
struct Queries8 {
  std::vector<BlockQ8_0> q;
  std::vector<int32_t> sums;
  Queries8(const std::vector<float>& x, int n_q, int64_t hd)
      : q(static_cast<size_t>(n_q * hd / kQK)), sums(q.size()) {
    for (int i = 0; i < n_q; ++i)
      quantize_row(GgmlType::Q8_0, x.data() + i * hd, q.data() + i * hd / kQK, hd);
    for (size_t b = 0; b < q.size(); ++b) {
      for (int8_t c : q[b].qs) sums[b] += c;
    }
  }
  QueriesQ8 view() const { return {q.data(), sums.data()}; }
};

// A K8Block's storage, 64-byte aligned.
struct K8Storage {
  alignas(64) uint8_t codes[256 / 4 * 64];
  alignas(64) float scales[256 / kQK * 16];
  K8Block block() { return {codes, scales}; }
  ConstK8Block view() const { return {codes, scales}; }
};

// A V16Block's storage, 64-byte aligned.
struct V16Storage {
  alignas(64) int16_t pairs[16 * 256];
  alignas(64) float scales[256 / kQK * 16];
  V16Block block() { return {pairs, scales}; }
  ConstV16Block view() const { return {pairs, scales}; }
};

float q8_value(const uint8_t* row, int64_t i) {
  const auto* b = reinterpret_cast<const BlockQ8_0*>(row) + i / kQK;
  return fp16_to_fp32(b->d) * b->qs[i % kQK];
}

TEST(BlockAttentionI8Test, KCodesAreTransposedByFoursPlus128InEveryIsa) {
  std::mt19937 rng(7);
  for (int64_t hd : {64, 128, 256}) {
    for (int n : {1, 7, 16}) {
      const auto rows = random_q8_0_rows(n, hd, rng);
      const uint8_t* r[16];
      for (int p = 0; p < n; ++p) r[p] = rows[static_cast<size_t>(p)].data();
      K8Storage want;
      std::memset(&want, 0x5a, sizeof(want));  // stale data: every byte must be written
      block_attention_kernels_scalar().convert_block_q8_0_i8(r, n, hd, want.block());
      for (int p = 0; p < 16; ++p) {
        for (int64_t i = 0; i < hd; ++i) {
          const auto* b = reinterpret_cast<const BlockQ8_0*>(r[std::min(p, n - 1)]) + i / kQK;
          const int code = p < n ? b->qs[i % kQK] : 0;
          ASSERT_EQ(want.codes[i / 4 * 64 + 4 * p + i % 4], code + 128) << p << " " << i;
        }
        for (int64_t b = 0; b < hd / kQK; ++b) {
          const float d =
              p < n ? fp16_to_fp32(reinterpret_cast<const BlockQ8_0*>(r[p])[b].d) : 0.0f;
          ASSERT_EQ(want.scales[b * 16 + p], d);
          if (p >= n) {
            ASSERT_FALSE(std::signbit(want.scales[b * 16 + p]));
          }
        }
      }
      for (const BlockAttentionKernels* kern : all_kernels()) {
        K8Storage got;
        std::memset(&got, 0xa5, sizeof(got));
        kern->convert_block_q8_0_i8(r, n, hd, got.block());
        ASSERT_EQ(std::memcmp(got.codes, want.codes, static_cast<size_t>(hd * 16)), 0) << hd << n;
        ASSERT_EQ(std::memcmp(got.scales, want.scales, static_cast<size_t>(hd / kQK * 16 * 4)), 0);
      }
    }
  }
}

TEST(BlockAttentionI8Test, VCodesArePairedAsInt16InEveryIsa) {
  std::mt19937 rng(9);
  for (int64_t hd : {64, 96, 128, 256}) {
    for (int n : {1, 7, 16}) {
      const auto rows = random_q8_0_rows(n, hd, rng);
      const uint8_t* r[16];
      for (int p = 0; p < n; ++p) r[p] = rows[static_cast<size_t>(p)].data();
      V16Storage want;
      std::memset(&want, 0x5a, sizeof(want));  // stale data: every value must be written
      block_attention_kernels_scalar().convert_block_q8_0_v16(r, n, hd, want.block());
      const int64_t nb = hd / kQK;
      std::vector<int> seen(static_cast<size_t>(16 * hd));
      for (int p = 0; p < 16; ++p) {
        for (int64_t i = 0; i < hd; ++i) {
          const int64_t at = v16_index(nb, p, i);
          ASSERT_LT(at, 16 * hd);
          ++seen[static_cast<size_t>(at)];
          const auto* b = reinterpret_cast<const BlockQ8_0*>(r[std::min(p, n - 1)]) + i / kQK;
          ASSERT_EQ(want.pairs[at], p < n ? b->qs[i % kQK] : 0) << p << " " << i;
        }
        for (int64_t b = 0; b < nb; ++b) {
          const float d =
              p < n ? fp16_to_fp32(reinterpret_cast<const BlockQ8_0*>(r[p])[b].d) : 0.0f;
          ASSERT_EQ(std::bit_cast<uint32_t>(want.scales[b * 16 + p]), std::bit_cast<uint32_t>(d));
        }
      }
      // Each int16 of the block holds one (position, column): a pair's two positions side by side.
      ASSERT_EQ(std::count(seen.begin(), seen.end(), 1), 16 * hd);
      EXPECT_EQ(v16_index(nb, 1, 5), v16_index(nb, 0, 5) + 1);
      for (const BlockAttentionKernels* kern : all_kernels()) {
        V16Storage got;
        std::memset(&got, 0xa5, sizeof(got));
        kern->convert_block_q8_0_v16(r, n, hd, got.block());
        ASSERT_EQ(std::memcmp(got.pairs, want.pairs, static_cast<size_t>(hd * 16 * 2)), 0)
            << hd << n;
        ASSERT_EQ(std::memcmp(got.scales, want.scales, static_cast<size_t>(nb * 16 * 4)), 0);
      }
    }
  }
}

// The int16 weights' powers of two: the largest |u| lands in [2^14, 2^15).
TEST(BlockAttentionI8Test, Int16ScalePutsTheLargestWeightBelow2To15) {
  for (float top : {1.0f, 0.75f, 3.1e-3f, 1.9e-20f, 6.0e-30f}) {
    const I16Scale s = i16_scale(std::bit_cast<uint32_t>(top));
    EXPECT_GE(top * s.up, 16384.0f) << top;
    EXPECT_LT(top * s.up, 32768.0f) << top;
    EXPECT_EQ(s.up * s.down, 1.0f) << top;
  }
  // Below 2^-112 the scale stops at 2^126 (fewer bits, never an infinite scale).
  const I16Scale tiny = i16_scale(std::bit_cast<uint32_t>(1e-38f));
  EXPECT_EQ(tiny.up, std::ldexp(1.0f, 126));
  EXPECT_EQ(i16_scale(0).up, std::ldexp(1.0f, 126));
  EXPECT_TRUE(std::isnan(i16_scale(0x7f800000u).down));
}

// softmax(q8 . K / sqrt(hd)) V in doubles, q8 the query as its Q8_0 blocks give it back.
std::vector<double> exact_attention(const std::vector<std::vector<uint8_t>>& k,
                                    const std::vector<std::vector<uint8_t>>& v, const BlockQ8_0* q,
                                    int64_t hd, double scale) {
  std::vector<double> s(k.size());
  for (size_t p = 0; p < k.size(); ++p) {
    double d = 0;
    for (int64_t i = 0; i < hd; ++i) {
      d += double(fp16_to_fp32(q[i / kQK].d)) * q[i / kQK].qs[i % kQK] * q8_value(k[p].data(), i);
    }
    s[p] = d * scale;
  }
  return softmax_weighted(s, hd, [&](size_t p, int64_t i) { return q8_value(v[p].data(), i); });
}

// The scalar reference against doubles; then the block kernel (attend_block_i8 on a converted
// block, prompts) and the decode kernel (attend_block_q8_0_i8_group on the rows) of every ISA
// against the reference's bits, for 1 to 13 queries, full and partial blocks, rows past `valid`
// holding data, and the next block's rows given (a prefetch: no bit may change).
TEST(BlockAttentionI8Test, KernelsGiveTheReferenceBitsAndItIsAttention) {
  const BlockAttentionKernels& ref = block_attention_kernels_scalar();
  std::mt19937 rng(800);
  std::normal_distribution<float> g(0.0f, 1.0f);
  int checked_simd = 0;
  for (int64_t hd : {128, 64, 256}) {
    for (int n : {1, 7, 16, 33, 300}) {
      const auto k = random_q8_0_rows(n, hd, rng), v = random_q8_0_rows(n, hd, rng);
      for (int n_q : {1, 5, 6, 7, 13}) {
        for (int cut : {0, 3}) {
          const std::vector<float> x = random_queries(n_q, hd, g, rng);
          const Queries8 q(x, n_q, hd);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          const std::string what = "head_dim " + std::to_string(hd) + ", " + std::to_string(n) +
                                   " positions, " + std::to_string(n_q) + " queries, cut " +
                                   std::to_string(cut);
          std::vector<float> vf(static_cast<size_t>(16 * hd));
          GroupStates want(n_q, hd), want_f32(n_q, hd);  // int16 V sums, f32 V sums
          std::vector<GroupStates> block_got, block_got_f32, rows_got;
          const auto kernels = all_kernels();
          for (size_t i = 0; i < kernels.size(); ++i) {
            block_got.emplace_back(n_q, hd);
            block_got_f32.emplace_back(n_q, hd);
            rows_got.emplace_back(n_q, hd);
          }
          for (int b0 = 0; b0 < n; b0 += 16) {
            const BlockOf<uint8_t> b(k, v, b0, cut);
            const int nb = b.nb, valid = b.valid;
            const uint8_t* const* kr = b.k;
            const uint8_t* const* vr = b.v;
            K8Storage k8;
            V16Storage v16;
            ref.convert_block_q8_0_i8(kr, nb, hd, k8.block());
            ref.convert_block_q8_0(vr, nb, hd, hd, vf.data());
            ref.convert_block_q8_0_v16(vr, nb, hd, v16.block());
            ref.attend_block_i8_v16(k8.view(), v16.view(), valid, q.view(), n_q, hd, scale,
                                    want.st.data());
            ref.attend_block_i8(k8.view(), vf.data(), valid, q.view(), n_q, hd, scale,
                                want_f32.st.data());
            ponder::BlockRows rows;
            const ponder::BlockRows* next = rows_ahead(k, v, b0 + 16, 16, rows);
            for (size_t i = 0; i < kernels.size(); ++i) {
              K8Storage kk;
              V16Storage vv;
              kernels[i]->convert_block_q8_0_i8(kr, nb, hd, kk.block());
              kernels[i]->convert_block_q8_0_v16(vr, nb, hd, vv.block());
              kernels[i]->attend_block_i8_v16(kk.view(), vv.view(), valid, q.view(), n_q, hd, scale,
                                              block_got[i].st.data());
              kernels[i]->attend_block_i8(kk.view(), vf.data(), valid, q.view(), n_q, hd, scale,
                                          block_got_f32[i].st.data());
              if (kernels[i]->q8_0_i8_group_takes(hd)) {
                kernels[i]->attend_block_q8_0_i8_group(kr, vr, valid, q.view(), n_q, hd, scale,
                                                       rows_got[i].st.data(), next);
              }
            }
          }
          // The reference is attention over the positions each query saw.
          const int last = (n - 1) / 16 * 16, seen = last + std::max(1, n - last - cut);
          const std::vector<std::vector<uint8_t>> ks(k.begin(), k.begin() + seen),
              vs(v.begin(), v.begin() + seen);
          // The int16 weights keep 15 bits next to a block's largest (at most 1 * |dv| <= 0.1
          // here), so each is off by at most 2^-15 of it, times a code of at most 128.
          for (int h = 0; h < n_q; ++h) {
            const std::vector<double> exact =
                exact_attention(ks, vs, q.q.data() + h * hd / kQK, hd, scale);
            const SoftmaxState& st = want_f32.st[static_cast<size_t>(h)];
            const SoftmaxState& st16 = want.st[static_cast<size_t>(h)];
            const double blocks = (seen + 15) / 16;
            for (int64_t i = 0; i < hd; ++i) {
              ASSERT_NEAR(st.acc[i] / st.l, exact[static_cast<size_t>(i)], 2e-5) << what;
              ASSERT_NEAR(st16.acc[i] / st16.l, exact[static_cast<size_t>(i)],
                          2e-5 + blocks * 16 * 0.1 * 128 * std::ldexp(1.0, -15) / st16.l)
                  << what;
            }
          }
          for (size_t i = 0; i < kernels.size(); ++i) {
            expect_same_states(block_got[i], want, hd, "block kernel, " + what);
            expect_same_states(block_got_f32[i], want_f32, hd, "block kernel (f32 V), " + what);
            if (kernels[i]->q8_0_i8_group_takes(hd)) {
              expect_same_states(rows_got[i], want, hd, "rows kernel, " + what);
              ++checked_simd;
            }
          }
        }
      }
    }
  }
  if (checked_simd == 0)
    GTEST_SKIP() << "no int8-scores decode kernel on this CPU (AVX512_VNNI, AVX-VNNI)";
}

}  // namespace
}  // namespace ponder
