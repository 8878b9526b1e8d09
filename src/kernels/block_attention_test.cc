// The block order's kernels: every ISA's version gives the scalar reference's bits, and the
// result is softmax attention (against a double-precision computation).
#include "kernels/block_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_attention_test_support.h"
#include "quant/half.h"

namespace ponder {
namespace {

using namespace block_attention_test;

TEST(BlockAttentionTest, ExpIsCloseToExpAndZeroFarBelow) {
  for (float x = -85.9f; x <= 0.0f; x += 0.0137f) {
    const double want = std::exp(static_cast<double>(x));
    EXPECT_NEAR(exp_nonpositive(x), want, want * 4e-7) << x;
  }
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(-86.5f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-INFINITY), 0.0f);
}

// n positions (f16 K and V rows) attended by one query in blocks of 16, as attention does.
struct Case {
  int64_t hd, hdp;
  std::vector<std::vector<uint16_t>> k, v;
  std::vector<float> q;  // [hdp], zeros past hd

  Case(int64_t head_dim, int n, uint32_t seed) : hd(head_dim), hdp((head_dim + 15) / 16 * 16) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    k.assign(static_cast<size_t>(n), std::vector<uint16_t>(static_cast<size_t>(hd)));
    v = k;
    for (auto& row : k)
      for (auto& e : row) e = fp32_to_fp16(3.0f * g(rng));
    for (auto& row : v)
      for (auto& e : row) e = fp32_to_fp16(g(rng));
    q.assign(static_cast<size_t>(hdp), 0.0f);
    for (int64_t i = 0; i < hd; ++i) q[static_cast<size_t>(i)] = g(rng);
  }

  // acc / l after every block, with the given kernels; `scratch` rows >= n hold stale data.
  std::vector<float> run(const BlockAttentionKernels& kern, float scale) const {
    const int n = static_cast<int>(k.size());
    std::vector<float> kf(16 * hdp, 7.0f), vf(16 * hdp, 7.0f), acc(hdp, 0.0f);
    SoftmaxState st{-INFINITY, 0.0f, acc.data()};
    for (int b0 = 0; b0 < n; b0 += 16) {
      const int nb = std::min(16, n - b0);
      const uint16_t* kr[16];
      const uint16_t* vr[16];
      block_rows(k, v, b0, nb, kr, vr);
      kern.convert_block(kr, nb, hd, hdp, kf.data());
      kern.convert_block(vr, nb, hd, hdp, vf.data());
      kern.attend_block(kf.data(), vf.data(), q.data(), nb, hdp, scale, st);
    }
    std::vector<float> out(static_cast<size_t>(hd));
    for (int64_t i = 0; i < hd; ++i)
      out[static_cast<size_t>(i)] = acc[static_cast<size_t>(i)] * (1.0f / st.l);
    for (int64_t i = hd; i < hdp; ++i) EXPECT_EQ(acc[static_cast<size_t>(i)], 0.0f);
    return out;
  }

  std::vector<double> exact(double scale) const {
    std::vector<double> s(k.size());
    for (size_t p = 0; p < k.size(); ++p) {
      double d = 0;
      for (int64_t i = 0; i < hd; ++i)
        d += double(q[static_cast<size_t>(i)]) * fp16_to_fp32(k[p][static_cast<size_t>(i)]);
      s[p] = d * scale;
    }
    return softmax_weighted(s, hd, [&](size_t p, int64_t i) {
      return double(fp16_to_fp32(v[p][static_cast<size_t>(i)]));
    });
  }
};

TEST(BlockAttentionTest, EveryIsaGivesTheReferenceBitsAndItIsAttention) {
  uint32_t seed = 1;
  for (int64_t hd : {128, 64, 40}) {
    for (int n : {1, 5, 16, 17, 40, 300}) {
      const Case c(hd, n, seed++);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      const std::vector<float> want = c.run(block_attention_kernels_scalar(), scale);
      const std::vector<double> exact = c.exact(scale);
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(want[i], exact[i], 2e-5) << hd << " " << n;
      for (const BlockAttentionKernels* kern : all_kernels()) {
        const std::vector<float> got = c.run(*kern, scale);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
            << "head_dim " << hd << ", " << n << " positions";
      }
    }
  }
}

// The fused decode form (attend_block_f16_group, where built) against the scalar reference's
// convert_block + attend_block for each query in turn: the same bits for 1 to 13 queries sharing
// the rows, full and partial blocks, and a last block whose rows past `valid` hold data.

// The scalar reference over block b for the queries q [want's count][hd]: K and V converted to
// f32 (kf, vf) by `convert`, then attend_block for each query in turn.
template <class T, class Convert>
void reference_block(const BlockOf<T>& b, Convert convert, const float* q, int64_t hd, float scale,
                     std::vector<float>& kf, std::vector<float>& vf, GroupStates& want) {
  convert(b.k, b.nb, hd, hd, kf.data());
  convert(b.v, b.nb, hd, hd, vf.data());
  for (size_t i = 0; i < want.st.size(); ++i) {
    block_attention_kernels_scalar().attend_block(kf.data(), vf.data(), q + i * hd, b.valid, hd,
                                                  scale, want.st[i]);
  }
}

// The block after b0 where it is full; the bf16-cache kernel's next step (32 rows) from b0.
const ponder::BlockRows* next_block(const std::vector<std::vector<uint16_t>>& k,
                                    const std::vector<std::vector<uint16_t>>& v, int b0,
                                    ponder::BlockRows& out) {
  return rows_ahead(k, v, b0 + kAttnBlock, kAttnBlock, out);
}
const ponder::BlockRows* next_step(const std::vector<std::vector<uint16_t>>& k,
                                   const std::vector<std::vector<uint16_t>>& v, int b0,
                                   ponder::BlockRows& out) {
  return rows_ahead(k, v, b0, kAttnStepBf16, out);
}

TEST(BlockAttentionTest, GroupedKernelsGiveTheReferenceBits) {
  std::vector<const BlockAttentionKernels*> fused;
  for (const BlockAttentionKernels* kern : all_kernels()) {
    if (kern->attend_block_f16_group != nullptr || kern->attend_block_group != nullptr)
      fused.push_back(kern);
  }
  if (fused.empty()) GTEST_SKIP() << "no grouped kernel on this CPU";
  const BlockAttentionKernels& ref = block_attention_kernels_scalar();
  uint32_t seed = 100;
  for (int64_t hd : {128, 64, 256, 80}) {  // 80: one the f16 rows' kernel does not take
    for (int n : {1, 7, 16, 33, 300}) {
      for (int n_q : {1, 2, 5, 6, 7, 13}) {
        for (int cut : {0, 3}) {  // the last block's query sees `cut` fewer positions than it has
          const Case c(hd, n, seed++);
          std::mt19937 rng(seed);
          std::normal_distribution<float> g(0.0f, 1.0f);
          const std::vector<float> q = random_queries(n_q, hd, g, rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<float> kf(16 * hd), vf(16 * hd);
          for (const BlockAttentionKernels* kern : fused) {
            // got: from the f16 rows (decode's kernel); got32: from the converted f32 block.
            GroupStates want(n_q, hd), got(n_q, hd), got32(n_q, hd);
            for (int b0 = 0; b0 < n; b0 += 16) {
              const BlockOf<uint16_t> b(c.k, c.v, b0, cut);
              reference_block(b, ref.convert_block, q.data(), hd, scale, kf, vf, want);
              ponder::BlockRows rows;
              const ponder::BlockRows* next = next_block(c.k, c.v, b0, rows);
              if (kern->f16_group_takes(hd)) {
                kern->attend_block_f16_group(b.k, b.v, b.valid, q.data(), n_q, hd, scale,
                                             got.st.data(), next);
              }
              if (kern->attend_block_group != nullptr) {
                kern->attend_block_group(kf.data(), vf.data(), b.valid, q.data(), n_q, hd, scale,
                                         got32.st.data(), next);
              }
            }
            const std::string what = "head_dim " + std::to_string(hd) + ", " + std::to_string(n) +
                                     " positions, " + std::to_string(n_q) + " queries, cut " +
                                     std::to_string(cut);
            if (kern->f16_group_takes(hd)) expect_same_states(got, want, hd, "f16 rows, " + what);
            if (kern->attend_block_group != nullptr)
              expect_same_states(got32, want, hd, "f32 block, " + what);
          }
        }
      }
    }
  }
}

TEST(BlockAttentionTest, FoldIsFmaOfTheScaledRunInEveryIsa) {
  std::mt19937 rng(2);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> o0(144), acc(144);
  for (float& e : o0) e = g(rng);
  for (float& e : acc) e = g(rng);
  const float a = 0.37f, b = 0.91f;
  for (const BlockAttentionKernels* kern : all_kernels()) {
    std::vector<float> o = o0;
    kern->fold(o.data(), acc.data(), a, b, 144);
    for (size_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], std::fma(acc[i], b, o0[i] * a)) << i;
  }
}

// The fused decode form on Q8_0 rows (attend_block_q8_0_group, where built) against the scalar
// reference's convert_block_q8_0 + attend_block for each query in turn: the same bits, with full
// and partial blocks and rows past `valid` holding data.
TEST(BlockAttentionTest, Q8_0RowsKernelGivesTheReferenceBits) {
  const BlockAttentionKernels& ref = block_attention_kernels_scalar();
  bool built = false;
  std::mt19937 rng(400);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (int64_t hd : {128, 64, 256}) {
    for (int n : {1, 7, 16, 33, 300}) {
      const std::vector<std::vector<uint8_t>> k = random_q8_0_rows(n, hd, rng),
                                              v = random_q8_0_rows(n, hd, rng);
      for (int n_q : {1, 5, 6, 7, 13}) {
        for (int cut : {0, 3}) {
          const std::vector<float> q = random_queries(n_q, hd, g, rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<float> kf(static_cast<size_t>(16 * hd)), vf(kf);
          for (const BlockAttentionKernels* kern : all_kernels()) {
            if (kern->attend_block_q8_0_group == nullptr) continue;
            built = true;
            GroupStates want(n_q, hd), got(n_q, hd);
            for (int b0 = 0; b0 < n; b0 += 16) {
              const BlockOf<uint8_t> b(k, v, b0, cut);
              reference_block(b, ref.convert_block_q8_0, q.data(), hd, scale, kf, vf, want);
              ponder::BlockRows rows;
              kern->attend_block_q8_0_group(b.k, b.v, b.valid, q.data(), n_q, hd, scale,
                                            got.st.data(), rows_ahead(k, v, b0 + 16, 16, rows));
            }
            expect_same_states(got, want, hd,
                               "head_dim " + std::to_string(hd) + ", " + std::to_string(n) +
                                   " positions, " + std::to_string(n_q) + " queries, cut " +
                                   std::to_string(cut));
          }
        }
      }
    }
  }
  if (!built) GTEST_SKIP() << "no Q8_0 rows kernel on this CPU";
}

// Q8_0 rows (34-byte blocks: f16 scale, 32 int8) to f32: f32(d) * q in every ISA, zeros past n.
TEST(BlockAttentionTest, Q8_0BlocksConvertToScaleTimesCodeInEveryIsa) {
  std::mt19937 rng(11);
  for (int64_t hd : {128, 64, 32}) {
    for (int n : {1, 7, 16}) {
      const std::vector<std::vector<uint8_t>> rows = random_q8_0_rows(n, hd, rng);
      const uint8_t* ptrs[16];
      for (int p = 0; p < n; ++p) ptrs[p] = rows[static_cast<size_t>(p)].data();
      for (const BlockAttentionKernels* kern : all_kernels()) {
        std::vector<float> out(static_cast<size_t>(16 * hd), 7.0f);
        kern->convert_block_q8_0(ptrs, n, hd, hd, out.data());
        for (int p = 0; p < 16; ++p) {
          for (int64_t i = 0; i < hd; ++i) {
            float want = 0.0f;
            if (p < n) {
              const uint8_t* blk = ptrs[p] + i / 32 * 34;
              uint16_t d;
              std::memcpy(&d, blk, 2);
              want = fp16_to_fp32(d) * static_cast<float>(static_cast<int8_t>(blk[2 + i % 32]));
            }
            ASSERT_EQ(out[static_cast<size_t>(p * hd + i)], want)
                << "hd " << hd << " n " << n << " p " << p << " i " << i;
          }
        }
      }
    }
  }
}

// The bf16-scores variant. Rounding: nearest even, NaN quiet, subnormals to signed zero.
TEST(BlockAttentionTest, Bf16RoundingIsNearestEvenWithSubnormalsFlushed) {
  const float x[] = {1.0f,      1.00390625f, 1.005859375f, -3.14159f,
                     0x1p-130f, -0x1p-140f,  0x1p-126f,    65504.0f};
  uint16_t out[10];
  round_to_bf16(x, 8, 10, out);
  EXPECT_EQ(out[0], 0x3f80);
  EXPECT_EQ(out[1], 0x3f80);  // 1 + 2^-8: a tie, to even
  EXPECT_EQ(out[2], 0x3f81);  // 1 + 1.5 * 2^-8: up
  EXPECT_EQ(out[3], fp32_to_bf16(-3.14159f));
  EXPECT_EQ(out[4], 0x0000);
  EXPECT_EQ(out[5], 0x8000);
  EXPECT_EQ(out[6], 0x0080);  // the smallest normal stays
  EXPECT_EQ(out[7], fp32_to_bf16(65504.0f));
  EXPECT_EQ(out[8], 0);
  EXPECT_EQ(out[9], 0);
  // Random bit patterns (every class: zeros, subnormals, normals, infinities, NaNs) against the
  // definition: a subnormal to a zero of its sign, then fp32_to_bf16.
  std::mt19937 rng(7);
  std::vector<float> many(4096);
  for (size_t i = 0; i < many.size(); ++i) {
    uint32_t u = static_cast<uint32_t>(rng());
    if (i % 4 == 1) u &= 0x807fffffu;  // exponent 0: subnormal or zero
    if (i % 4 == 2) u |= 0x7f800000u;  // exponent all ones: infinity or NaN
    many[i] = std::bit_cast<float>(u);
  }
  std::vector<uint16_t> got(many.size());
  round_to_bf16(many.data(), static_cast<int64_t>(many.size()), static_cast<int64_t>(many.size()),
                got.data());
  for (size_t i = 0; i < many.size(); ++i) {
    const float f =
        std::fpclassify(many[i]) == FP_SUBNORMAL ? std::copysign(0.0f, many[i]) : many[i];
    ASSERT_EQ(got[i], fp32_to_bf16(f)) << std::hex << std::bit_cast<uint32_t>(many[i]);
  }
}

// f16 and Q8_0 rows to bf16 blocks: every ISA's conversion gives the reference's bits.
TEST(BlockAttentionTest, Bf16BlocksConvertAsTheReferenceInEveryIsa) {
  const BlockAttentionKernels& ref = block_attention_kernels_scalar();
  std::mt19937 rng(12);
  std::normal_distribution<float> g(0.0f, 2.0f);
  for (int64_t hd : {128, 80, 64}) {
    const int64_t hdp32 = (hd + 31) / 32 * 32;
    for (int n : {1, 7, 16}) {
      std::vector<std::vector<uint16_t>> rows(static_cast<size_t>(n),
                                              std::vector<uint16_t>(static_cast<size_t>(hd)));
      for (auto& row : rows)
        for (auto& e : row) e = fp32_to_fp16(g(rng));
      rows[0][0] = fp32_to_fp16(0x1p-20f);  // an f16 subnormal, a normal f32
      const std::vector<std::vector<uint8_t>> q8 = random_q8_0_rows(n, hd, rng);
      const uint16_t* rp[16];
      const uint8_t* qp[16];
      for (int p = 0; p < n; ++p) {
        rp[p] = rows[static_cast<size_t>(p)].data();
        qp[p] = q8[static_cast<size_t>(p)].data();
      }
      std::vector<uint16_t> want(static_cast<size_t>(16 * hdp32), 7), want_q8(want);
      ref.convert_block_bf16(rp, n, hd, hdp32, want.data());
      if (hd % 32 == 0) ref.convert_block_q8_0_bf16(qp, n, hd, hdp32, want_q8.data());
      EXPECT_EQ(want[static_cast<size_t>(hd - 1)],
                fp32_to_bf16(fp16_to_fp32(rows[0][static_cast<size_t>(hd - 1)])));
      for (const BlockAttentionKernels* kern : all_kernels()) {
        std::vector<uint16_t> got(static_cast<size_t>(16 * hdp32), 7), got_q8(got);
        kern->convert_block_bf16(rp, n, hd, hdp32, got.data());
        ASSERT_EQ(got, want) << "f16 rows, hd " << hd << " n " << n;
        if (hd % 32 != 0) continue;
        kern->convert_block_q8_0_bf16(qp, n, hd, hdp32, got_q8.data());
        ASSERT_EQ(got_q8, want_q8) << "q8_0 rows, hd " << hd << " n " << n;
      }
    }
  }
}

// The reference's bf16 scores are the dot products of the rounded values (against double), and
// every ISA's grouped kernels give its bits, from an f32 V block and from f16 V rows.
TEST(BlockAttentionTest, Bf16ScoresGroupedKernelsGiveTheReferenceBits) {
  const BlockAttentionKernels& ref = block_attention_kernels_scalar();
  uint32_t seed = 300;
  for (int64_t hd : {128, 64, 80}) {
    const int64_t hdp32 = (hd + 31) / 32 * 32;
    for (int n : {1, 7, 16, 33, 300}) {
      for (int n_q : {1, 5, 6, 7, 13}) {
        for (int cut : {0, 3}) {
          const Case c(hd, n, seed++);
          std::mt19937 rng(seed);
          std::normal_distribution<float> g(0.0f, 1.0f);
          const std::vector<float> q = random_queries(n_q, hd, g, rng);
          const std::vector<uint16_t> qb = bf16_queries(q, n_q, hd, hdp32);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          std::vector<uint16_t> kb(static_cast<size_t>(16 * hdp32));
          std::vector<float> vf(static_cast<size_t>(16 * hd));
          GroupStates want(n_q, hd), got(n_q, hd), got16(n_q, hd);
          const BlockAttentionKernels* simd = nullptr;
          for (const BlockAttentionKernels* kern : all_kernels()) {
            if (kern->attend_block_bf16_group != nullptr) simd = kern;
          }
          for (int b0 = 0; b0 < n; b0 += 16) {
            const BlockOf<uint16_t> b(c.k, c.v, b0, cut);
            ref.convert_block_bf16(b.k, b.nb, hd, hdp32, kb.data());
            ref.convert_block(b.v, b.nb, hd, hd, vf.data());
            if (b0 == 0 && n_q == 1 && cut == 0) {
              // A one-position block leaves m = its score: the double dot of the rounded values.
              GroupStates one(1, hd);
              ref.attend_block_bf16(kb.data(), vf.data(), qb.data(), 1, hd, hdp32, scale,
                                    one.st[0]);
              double dot = 0;
              for (int64_t i = 0; i < hd; ++i) {
                dot += static_cast<double>(bf16_to_fp32(kb[static_cast<size_t>(i)])) *
                       bf16_to_fp32(qb[static_cast<size_t>(i)]);
              }
              EXPECT_NEAR(one.st[0].m, dot * scale, 1e-4 * (1 + std::fabs(dot))) << "hd " << hd;
            }
            for (int i = 0; i < n_q; ++i) {
              ref.attend_block_bf16(kb.data(), vf.data(), qb.data() + i * hdp32, b.valid, hd, hdp32,
                                    scale, want.st[static_cast<size_t>(i)]);
            }
            if (simd == nullptr) continue;
            const uint16_t* kr[16];
            for (int p = 0; p < 16; ++p) kr[p] = kb.data() + p * hdp32;
            simd->attend_block_bf16_group(kr, vf.data(), b.valid, qb.data(), n_q, hd, hdp32, scale,
                                          got.st.data());
            if (hd % 64 == 0) {
              simd->attend_block_bf16_f16_group(kr, b.v, b.valid, qb.data(), n_q, hd, hdp32, scale,
                                                got16.st.data());
            }
          }
          if (simd == nullptr) continue;
          const std::string what = "head_dim " + std::to_string(hd) + ", " + std::to_string(n) +
                                   " positions, " + std::to_string(n_q) + " queries, cut " +
                                   std::to_string(cut);
          expect_same_states(got, want, hd, "f32 V, " + what);
          if (hd % 64 == 0) expect_same_states(got16, want, hd, "f16 V, " + what);
        }
      }
    }
  }
}

// A bf16 cache (K and V rows of bf16): the reference is attention of the rounded values (against
// double, over whole sequences), and every ISA's grouped kernel gives its bits, with full and
// partial blocks and rows past `valid` holding data.
TEST(BlockAttentionTest, Bf16CacheKernelsGiveTheReferenceBitsAndItIsAttention) {
  const BlockAttentionKernels& ref = block_attention_kernels_scalar();
  uint32_t seed = 500;
  for (int64_t hd : {128, 64, 96, 80}) {  // the grouped kernel needs a multiple of 32
    const int64_t hdp32 = (hd + 31) / 32 * 32;
    for (int n : {1, 2, 7, 16, 33, 300}) {
      for (int n_q : {1, 5, 6, 7, 13}) {
        for (int cut : {0, 3}) {
          std::mt19937 rng(seed++);
          std::normal_distribution<float> g(0.0f, 1.0f);
          std::vector<std::vector<uint16_t>> k(static_cast<size_t>(n),
                                               std::vector<uint16_t>(static_cast<size_t>(hd)));
          std::vector<std::vector<uint16_t>> v = k;
          for (auto& row : k)
            for (auto& e : row) e = fp32_to_bf16(3.0f * g(rng));
          for (auto& row : v)
            for (auto& e : row) e = fp32_to_bf16(g(rng));
          const std::vector<float> q = random_queries(n_q, hd, g, rng);
          const std::vector<uint16_t> qb = bf16_queries(q, n_q, hd, hdp32);
          const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
          GroupStates want(n_q, hd), got(n_q, hd);
          int last_valid = 0;
          // Steps of up to 32 positions (kAttnStepBf16), some of 16 between them, the last cut
          // short.
          for (int b0 = 0; b0 < n;) {
            const int nb = std::min(b0 % 3 == 2 ? 16 : kAttnStepBf16, n - b0);
            const int valid = b0 + nb >= n ? std::max(1, nb - cut) : nb;
            last_valid = b0 + valid;
            const uint16_t* kr[kAttnStepBf16];
            const uint16_t* vr[kAttnStepBf16];
            block_rows(k, v, b0, nb, kr, vr);
            for (int i = 0; i < n_q; ++i) {
              ref.attend_block_bf16kv(kr, vr, valid, qb.data() + i * hdp32, hd, hdp32, scale,
                                      want.st[static_cast<size_t>(i)]);
            }
            ponder::BlockRows rows;
            const ponder::BlockRows* next = next_step(k, v, b0 + nb, rows);
            b0 += nb;
            for (const BlockAttentionKernels* kern : all_kernels()) {
              if (kern->bf16kv_group_takes(hd)) {
                kern->attend_block_bf16kv_group(kr, vr, valid, qb.data(), n_q, hd, scale,
                                                got.st.data(), next);
              }
            }
          }
          // Against double over the rounded values: each weight is rounded to bf16 (2^-9 relative),
          // so the output moves by up to ~2^-9 of the V values it averages (|V| < 5 here).
          for (int i = 0; i < n_q; ++i) {
            std::vector<double> s(static_cast<size_t>(last_valid));
            double mx = -INFINITY, sum = 0;
            for (int p = 0; p < last_valid; ++p) {
              double d = 0;
              for (int64_t j = 0; j < hd; ++j) {
                d += double(bf16_to_fp32(qb[static_cast<size_t>(i * hdp32 + j)])) *
                     bf16_to_fp32(k[static_cast<size_t>(p)][static_cast<size_t>(j)]);
              }
              mx = std::max(mx, s[static_cast<size_t>(p)] = d * scale);
            }
            for (double& e : s) sum += (e = std::exp(e - mx));
            const SoftmaxState& st = want.st[static_cast<size_t>(i)];
            for (int64_t j = 0; j < hd; ++j) {
              double o = 0;
              for (int p = 0; p < last_valid; ++p)
                o += s[static_cast<size_t>(p)] *
                     bf16_to_fp32(v[static_cast<size_t>(p)][static_cast<size_t>(j)]);
              ASSERT_NEAR(st.acc[j] / st.l, o / sum, 1e-2)
                  << "hd " << hd << " n " << n << " query " << i << " column " << j;
            }
          }
          bool grouped = false;
          for (const BlockAttentionKernels* kern : all_kernels())
            grouped |= kern->attend_block_bf16kv_group != nullptr;
          if (!grouped || hd % 32 != 0) continue;
          expect_same_states(got, want, hd,
                             "head_dim " + std::to_string(hd) + ", " + std::to_string(n) +
                                 " positions, " + std::to_string(n_q) + " queries, cut " +
                                 std::to_string(cut));
        }
      }
    }
  }
}

}  // namespace
}  // namespace ponder
