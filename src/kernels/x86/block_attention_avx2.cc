// AVX2 version of the block order's kernels (kernels/block_attention.h), bit for bit the scalar
// reference and the AVX-512 version: each 16-lane accumulator of the order is a pair of 8-lane
// registers (lanes 0-7, lanes 8-15), whose sum is the tree's first step; a transposing tree of
// shuffles and adds does the rest for 8 positions at once. The query vectors of a row go through
// a block together (each K and V vector loaded once for up to six of them), the scores by pairs
// of positions and threes of queries so that a product needs at most one load (two loads and two
// FMAs a cycle on Zen 2 and Skylake); one query vector is the same code for one.
// It keeps its own file rather than sharing the AVX-512 one's code through x86/vec_traits.h:
// the 16 lanes of each accumulator live in two registers here, so the score tree, the value
// loop and the row conversions are laid out differently, not the same loops at another width
// (what is the same is shared: ggml's exp steps, kernels/ggml_exp.h; the prefetch and the groups
// of six, x86/block_attention_steps.h).
// Compiled twice (src/kernels/CMakeLists.txt): for AVX2 + FMA + F16C, and with -mavxvnni and
// PONDER_AVXVNNI=1 for the AVX-VNNI level, where only the int8-scores kernels are built (the
// 256-bit vpdpbusd on the K8Block layout, each 64-byte vector as two halves of 8 positions).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/block_attention.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

#include "kernels/ggml_exp.h"
#include "kernels/x86/block_attention_steps.h"
#include "kernels/x86/vec_traits.h"

inline __m256 exp8_nonpositive(__m256 x) {
  const __m256 keep = _mm256_cmp_ps(x, _mm256_set1_ps(-86.0f), _CMP_GE_OQ);
  __m256 n;
  const __m256 j = exp_ggml_poly<F32xN<8>>(x, &n);
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_and_ps(keep, _mm256_mul_ps(j, _mm256_castsi256_ps(e)));
}

// tree16 of lanes 0-7 in lo and 8-15 in hi.
inline float tree16(__m256 lo, __m256 hi) {
  const __m256 t8 = _mm256_add_ps(lo, hi);
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 s = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// [a.lanes 0-3 + a.lanes 4-7 | b.lanes 0-3 + b.lanes 4-7]
inline __m256 fold4(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
// a and b's lanes paired by two shuffles within each 128-bit half (kFirst, kSecond) and added.
template <int kFirst, int kSecond>
inline __m256 fold_lanes(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, kFirst), _mm256_shuffle_ps(a, b, kSecond));
}
// Within each 128-bit half: [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
inline __m256 fold2(__m256 a, __m256 b) {
  return fold_lanes<_MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2)>(a, b);
}
// Within each 128-bit half: [a0 + a1, a2 + a3, b0 + b1, b2 + b3].
inline __m256 fold1(__m256 a, __m256 b) {
  return fold_lanes<_MM_SHUFFLE(2, 0, 2, 0), _MM_SHUFFLE(3, 1, 3, 1)>(a, b);
}

// Lane p = the rest of tree16 (after r8) of r[p], for 8 positions.
[[maybe_unused]] inline __m256 tree8(const __m256* r) {  // unused in the AVX-VNNI object
  // Positions a..h end in lanes [a c e g | b d f h]: pair (0, 4), (1, 5), (2, 6), (3, 7).
  const __m256 ab = fold4(r[0], r[4]), cd = fold4(r[1], r[5]);
  const __m256 ef = fold4(r[2], r[6]), gh = fold4(r[3], r[7]);
  return fold1(fold2(ab, cd), fold2(ef, gh));
}

inline float hmax8(__m256 a) {
  const __m128 t4 = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 t2 = _mm_max_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_max_ss(t2, _mm_movehdup_ps(t2)));
}

// The K or V rows of a block as the grouped kernels read them, 8 values at a time: f16 or Q8_0
// rows converted in registers (decode, straight from the cache; Q8_0 as convert_block_q8_0's
// f32(d) * q, one rounding) or a block already converted to f32 [16][hdp] (prompts).
struct F16Rows {
  const uint16_t* const* rows;
  __m256 load(int p, int64_t d) const {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[p] + d)));
  }
};
struct Q8_0Rows {
  const uint8_t* const* rows;
  __m256 load(int p, int64_t d) const {
    const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(rows[p])[d / kQK];
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b.qs + d % kQK));
    return _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(b.d)),
                         _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)));
  }
};
struct F32Block {
  const float* base;
  int64_t hdp;
  __m256 load(int p, int64_t d) const { return _mm256_loadu_ps(base + p * hdp + d); }
};

}  // namespace

#if !PONDER_AVXVNNI
void convert_block_avx2(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp, float* out) {
  const F16Rows f16{rows};
  rows_or_zeros(n, hdp, out, [&](int p, float* o) {
    int64_t i = 0;
    for (; i + 8 <= hd; i += 8) _mm256_storeu_ps(o + i, f16.load(p, i));
    for (; i < hd; ++i) o[i] = _cvtsh_ss(rows[p][i]);
    std::fill(o + hd, o + hdp, 0.0f);
  });
}

void convert_block_q8_0_avx2(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp,
                             float* out) {
  const Q8_0Rows q8{rows};
  rows_or_zeros(n, hdp, out, [&](int p, float* o) {
    for (int64_t i = 0; i < hd; i += 8) _mm256_storeu_ps(o + i, q8.load(p, i));
  });
}

void fold_avx2(float* o, const float* acc, float a, float b, int64_t hdp) {
  const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
  for (int64_t i = 0; i < hdp; i += 8) {
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_loadu_ps(acc + i), bv,
                                            _mm256_mul_ps(_mm256_loadu_ps(o + i), av)));
  }
}
#endif  // !PONDER_AVXVNNI

namespace {

// The softmax step of the header for the unscaled scores of positions 0-7 (lo) and 8-15 (hi) of
// which the first `valid` live: updates st.m and st.l, writes e (zeros past valid) to ev and
// returns the correction c of the accumulator.
inline float softmax_step(__m256 lo, __m256 hi, int valid, float scale, SoftmaxState& st,
                          float* ev) {
  const __m256 sc = _mm256_set1_ps(scale);
  const __m256 s_lo = _mm256_mul_ps(lo, sc);
  const __m256 s_hi = _mm256_mul_ps(hi, sc);
  // Lane masks of the live positions (all ones in lanes < valid).
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 live_lo = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid), lane));
  const __m256 live_hi =
      _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(valid - 8), lane));
  const __m256 ninf = _mm256_set1_ps(-INFINITY);
  const float mb = hmax8(
      _mm256_max_ps(_mm256_blendv_ps(ninf, s_lo, live_lo), _mm256_blendv_ps(ninf, s_hi, live_hi)));
  const float m_new = std::max(st.m, mb);
  const float corr =
      st.m == -INFINITY ? 0.0f : _mm256_cvtss_f32(exp8_nonpositive(_mm256_set1_ps(st.m - m_new)));
  const __m256 mv = _mm256_set1_ps(m_new);
  const __m256 e_lo = _mm256_and_ps(live_lo, exp8_nonpositive(_mm256_sub_ps(s_lo, mv)));
  const __m256 e_hi = _mm256_and_ps(live_hi, exp8_nonpositive(_mm256_sub_ps(s_hi, mv)));
  st.l = st.l * corr + tree16(e_lo, e_hi);
  st.m = m_new;
  _mm256_store_ps(ev, e_lo);
  _mm256_store_ps(ev + 8, e_hi);
  return corr;
}

// The kernels: the query vectors of one row (up to six at a time) see a block together, each K
// and V vector loaded (or converted from the cache's rows) once for all of them.

// The r8 values (tree16's first step: the two 8-lane halves of the 16 chains over hdp, added) of
// positions p0 and p0 + 1 for H (1..3) query vectors q [H][hdp]: each K vector loaded once for
// the H queries, each query vector once for both positions (as many loads as products: two of
// each a cycle on Zen 2 / Skylake). Step d / 16 asks for line d / 16 of the next block's V rows p0
// and p0 + 1 (pf).
template <int H, class Rows>
inline void pair_r8(const Rows& k, const float* q, int p0, int64_t hdp, const Prefetch& pf,
                    __m256 (*r8)[kAttnBlock]) {
  __m256 a[2][H], b[2][H];
  for (int j = 0; j < 2; ++j)
    for (int h = 0; h < H; ++h) a[j][h] = b[j][h] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hdp; d += 16) {
    pf.lines_of_row(p0, d / 16, d / 16 + 1);
    pf.lines_of_row(p0 + 1, d / 16, d / 16 + 1);
    const __m256 k00 = k.load(p0, d), k01 = k.load(p0, d + 8);
    const __m256 k10 = k.load(p0 + 1, d), k11 = k.load(p0 + 1, d + 8);
    for (int h = 0; h < H; ++h) {
      const __m256 q0 = _mm256_loadu_ps(q + h * hdp + d), q1 = _mm256_loadu_ps(q + h * hdp + d + 8);
      a[0][h] = _mm256_fmadd_ps(k00, q0, a[0][h]);
      b[0][h] = _mm256_fmadd_ps(k01, q1, b[0][h]);
      a[1][h] = _mm256_fmadd_ps(k10, q0, a[1][h]);
      b[1][h] = _mm256_fmadd_ps(k11, q1, b[1][h]);
    }
  }
  for (int h = 0; h < H; ++h) {
    r8[h][p0] = _mm256_add_ps(a[0][h], b[0][h]);
    r8[h][p0 + 1] = _mm256_add_ps(a[1][h], b[1][h]);
  }
}

// The unscaled scores of H (1..6) query vectors q [H][hdp] against the block's first `valid`
// positions: lo[h] holds positions 0-7, hi[h] 8-15 (past valid: whatever the rows give, never
// live), from pair_r8 by pairs of positions and threes of queries, then tree8.
template <int H, class Rows>
inline void group_scores(const Rows& k, const float* q, int valid, int64_t hdp, const Prefetch& pf,
                         __m256 (&lo)[H], __m256 (&hi)[H]) {
  __m256 r8[H][kAttnBlock];
  const int pairs = (valid + 1) / 2;
  for (int h = 0; h < H; ++h)
    for (int p = 2 * pairs; p < kAttnBlock; ++p) r8[h][p] = _mm256_setzero_ps();
  for (int i = 0; i < pairs; ++i) {
    pair_r8<std::min(H, 3)>(k, q, 2 * i, hdp, pf, r8);
    if constexpr (H > 3) pair_r8<H - 3>(k, q + 3 * hdp, 2 * i, hdp, Prefetch{}, r8 + 3);
  }
  for (int h = 0; h < H; ++h) {
    lo[h] = tree8(r8[h]);
    hi[h] = valid > 8 ? tree8(r8[h] + 8) : _mm256_setzero_ps();
  }
}

// acc[h] (the 16 columns from c0: C vectors of 8) times corr[h] where it is not 1, plus
// e[h][p] V[p] for p < valid, each V vector loaded once for the H queries (2H accumulators, 2 V
// vectors and a weight: the 16 registers). Position p asks for line line0 of the next block's K
// row p (pf).
template <int H, class Rows>
inline void add_values_group(const Rows& v, const float (*ev)[kAttnBlock], const float* corr,
                             int valid, int64_t c0, SoftmaxState* st, const Prefetch& pf,
                             int64_t line0) {
  constexpr int C = 2;
  __m256 a[H][C];
  for (int h = 0; h < H; ++h) {
    for (int c = 0; c < C; ++c) a[h][c] = _mm256_loadu_ps(st[h].acc + c0 + 8 * c);
    if (corr[h] != 1.0f) {
      const __m256 cv = _mm256_set1_ps(corr[h]);
      for (int c = 0; c < C; ++c) a[h][c] = _mm256_mul_ps(a[h][c], cv);
    }
  }
  for (int p = 0; p < valid; ++p) {
    pf.lines_of_row(p, line0, line0 + 1);
    __m256 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = v.load(p, c0 + 8 * c);
    for (int h = 0; h < H; ++h) {
      const __m256 w = _mm256_broadcast_ss(&ev[h][p]);
      for (int c = 0; c < C; ++c) a[h][c] = _mm256_fmadd_ps(w, vv[c], a[h][c]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c) _mm256_storeu_ps(st[h].acc + c0 + 8 * c, a[h][c]);
}

// H (1..6) query vectors through one block: scores, the softmax steps, then the V sums in chunks
// of 16 columns (hdp a multiple of 16).
template <int H, class Rows>
void attend_heads(const Rows& k, const Rows& v, int valid, const float* q, int64_t hdp, float scale,
                  SoftmaxState* st, const Prefetch& pv, const Prefetch& pk) {
  __m256 lo[H], hi[H];
  group_scores<H>(k, q, valid, hdp, pv, lo, hi);
  alignas(32) float ev[H][kAttnBlock];
  float corr[H];
  for (int h = 0; h < H; ++h) corr[h] = softmax_step(lo[h], hi[h], valid, scale, st[h], ev[h]);
  for (int64_t c0 = 0; c0 < hdp; c0 += 16)
    add_values_group<H>(v, ev, corr, valid, c0, st, pk, c0 / 16);
}

template <class Rows>
void attend_group(const Rows& k, const Rows& v, int valid, const float* q, int n_q, int64_t hdp,
                  float scale, SoftmaxState* st, const BlockRows* next) {
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads<h()>(k, v, valid, q + h0 * hdp, hdp, scale, st + h0, next_v(next, valid, h0),
                      next_k(next, valid, h0));
  });
}

#if PONDER_AVXVNNI
// --- The int8-scores variant (AVX-VNNI) ---------------------------------------------------------

// r[i] (row i: 8 32-bit words) to r[g] (word g of rows 0-7).
inline void transpose8x8_epi32(__m256i (&r)[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);      // words 0, 1 | 4, 5 of rows i, i + 1
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);  // words 2, 3 | 6, 7
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);          // word 0 | 4 of rows i..i + 3
    u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);      // word 1 | 5
    u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);  // word 2 | 6
    u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);  // word 3 | 7
  }
  for (int g = 0; g < 4; ++g) {
    r[g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x20);
    r[4 + g] = _mm256_permute2x128_si256(u[g], u[4 + g], 0x31);
  }
}

// scales[b * 16 + p] = f32 of the 16 rows' block scales, b < hd / 32.
inline void gather_scales(const uint8_t* const* rows, int64_t hd, float* scales) {
  for (int64_t b = 0; b < hd / kQK; ++b) {
    alignas(16) uint16_t d[kAttnBlock];
    for (int p = 0; p < kAttnBlock; ++p) d[p] = reinterpret_cast<const BlockQ8_0*>(rows[p])[b].d;
    for (int half = 0; half < 2; ++half) {
      _mm256_store_ps(
          scales + b * kAttnBlock + 8 * half,
          _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(d + 8 * half))));
    }
  }
}

// convert_block_q8_0_i8 for 16 rows (the caller points the rows past n at zero blocks): per Q8_0
// block and half of the positions, the 8 rows' codes + 128 transposed by groups of 4 bytes.
inline void convert_k8_rows(const uint8_t* const* rows, int64_t hd, K8Block out) {
  const __m256i offset = _mm256_set1_epi8(static_cast<char>(0x80));
  for (int64_t b = 0; b < hd / kQK; ++b) {
    for (int half = 0; half < 2; ++half) {
      __m256i r[8];
      for (int i = 0; i < 8; ++i) {
        const auto* blocks = reinterpret_cast<const BlockQ8_0*>(rows[8 * half + i]);
        r[i] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[b].qs)),
                                offset);
      }
      transpose8x8_epi32(r);
      for (int g = 0; g < 8; ++g) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(out.codes + (8 * b + g) * 64 + 32 * half),
                           r[g]);
      }
    }
  }
  gather_scales(rows, hd, out.scales);
}

// The unscaled scores of H (1..6) query vectors from a K8Block, positions 0-7 in lo[h] and 8-15
// in hi[h]: per Q8_0 block the exact integer sums by vpdpbusd (K's codes + 128 unsigned, the
// query's signed, from -128 * the query block's sum), then one fma with the scales' product.
template <int H>
inline void i8_scores(ConstK8Block k, QueriesQ8 q, int64_t hd, __m256 (&lo)[H], __m256 (&hi)[H]) {
  const int64_t nb = hd / kQK;
  for (int h = 0; h < H; ++h) lo[h] = hi[h] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m256i al[H], ah[H];
    for (int h = 0; h < H; ++h) al[h] = ah[h] = _mm256_set1_epi32(-128 * q.qsum[h * nb + b]);
    for (int g = 0; g < kQK / 4; ++g) {
      const uint8_t* c = k.codes + (b * (kQK / 4) + g) * 64;
      const __m256i kl = _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
      const __m256i kh = _mm256_load_si256(reinterpret_cast<const __m256i*>(c + 32));
      for (int h = 0; h < H; ++h) {
        int32_t word;
        std::memcpy(&word, q.q[h * nb + b].qs + 4 * g, sizeof(word));
        const __m256i w = _mm256_set1_epi32(word);
        al[h] = _mm256_dpbusd_avx_epi32(al[h], kl, w);
        ah[h] = _mm256_dpbusd_avx_epi32(ah[h], kh, w);
      }
    }
    const __m256 kdl = _mm256_load_ps(k.scales + b * kAttnBlock);
    const __m256 kdh = _mm256_load_ps(k.scales + b * kAttnBlock + 8);
    for (int h = 0; h < H; ++h) {
      const __m256 qd = _mm256_set1_ps(_cvtsh_ss(q.q[h * nb + b].d));
      lo[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(al[h]), _mm256_mul_ps(kdl, qd), lo[h]);
      hi[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ah[h]), _mm256_mul_ps(kdh, qd), hi[h]);
    }
  }
}

// H query vectors through one block with int8 scores: then the softmax steps and the V sums,
// v.add<H>(ev, corr) (hd a multiple of 16).
template <int H, class Values>
void attend_heads_i8(ConstK8Block k, const Values& v, int valid, QueriesQ8 q, int64_t hd,
                     float scale, SoftmaxState* st) {
  __m256 lo[H], hi[H];
  i8_scores<H>(k, q, hd, lo, hi);
  alignas(32) float ev[H][kAttnBlock];
  float corr[H];
  for (int h = 0; h < H; ++h) corr[h] = softmax_step(lo[h], hi[h], valid, scale, st[h], ev[h]);
  v.template add<H>(ev, corr, valid, hd, st);
}

// The f32 V sums of attend_heads, in chunks of 16 columns; chunk i asks for line i of the next
// block's K rows (pk).
template <class Rows>
struct F32Values {
  Rows rows;
  Prefetch pk = {};
  template <int H>
  void add(const float (*ev)[kAttnBlock], const float* corr, int valid, int64_t hd,
           SoftmaxState* st) const {
    for (int64_t c0 = 0; c0 < hd; c0 += 16)
      add_values_group<H>(rows, ev, corr, valid, c0, st, pk, c0 / 16);
  }
};

// The int16 V sums' pairs of positions (2k, 2k + 1) for the 16 columns from c (c % 16 = 0) of V
// block c / 32, columns c..c + 7 in lo and c + 8..c + 15 in hi, as vpdpwssd takes them: from a
// V16Block (v16_index: the columns 0-7 and 16-23 of a block in its first half, 8-15 and 24-31 in
// its second) or from the Q8_0 rows (16 codes of each row interleaved by bytes, sign-extended).
struct V16Pairs {
  const int16_t* pairs;
  int64_t nb;
  void load(int k, int64_t c, __m256i& lo, __m256i& hi) const {
    const int16_t* at = pairs + (k * nb + c / kQK) * 64 + (c % kQK == 0 ? 0 : 16);
    lo = _mm256_load_si256(reinterpret_cast<const __m256i*>(at));
    hi = _mm256_load_si256(reinterpret_cast<const __m256i*>(at + 32));
  }
};
struct Q8_0RowPairs {
  const uint8_t* const* rows;
  void load(int k, int64_t c, __m256i& lo, __m256i& hi) const {
    const auto codes = [&](int p) {
      const BlockQ8_0& b = reinterpret_cast<const BlockQ8_0*>(rows[p])[c / kQK];
      return _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + c % kQK));
    };
    const __m128i a = codes(2 * k), b = codes(2 * k + 1);
    lo = _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(a, b));
    hi = _mm256_cvtepi8_epi16(_mm_unpackhi_epi8(a, b));
  }
};

// Lane j = the largest uint32 lane of x[j], for 8 vectors at once: pairs of vectors folded by
// 128-bit halves (4 lanes each left), then by pairs of lanes (2) and by lanes (1), which leaves
// x[2m + h] in lane 4h + m; one permutation puts it in lane 2m + h.
inline __m256i max_of_each(const __m256i (&x)[8]) {
  const auto by_lanes = [](__m256i a, __m256i b, auto lo, auto hi) {
    const __m256 fa = _mm256_castsi256_ps(a), fb = _mm256_castsi256_ps(b);
    return _mm256_max_epu32(_mm256_castps_si256(_mm256_shuffle_ps(fa, fb, lo())),
                            _mm256_castps_si256(_mm256_shuffle_ps(fa, fb, hi())));
  };
  using std::integral_constant;
  __m256i y[4], z[2];
  for (int i = 0; i < 4; ++i) {
    y[i] = _mm256_max_epu32(_mm256_permute2x128_si256(x[2 * i], x[2 * i + 1], 0x20),
                            _mm256_permute2x128_si256(x[2 * i], x[2 * i + 1], 0x31));
  }
  for (int i = 0; i < 2; ++i) {
    z[i] = by_lanes(y[2 * i], y[2 * i + 1], integral_constant<int, _MM_SHUFFLE(1, 0, 1, 0)>(),
                    integral_constant<int, _MM_SHUFFLE(3, 2, 3, 2)>());
  }
  const __m256i r = by_lanes(z[0], z[1], integral_constant<int, _MM_SHUFFLE(2, 0, 2, 0)>(),
                             integral_constant<int, _MM_SHUFFLE(3, 1, 3, 1)>());
  return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The int16 V sums (block_attention.h) for H queries: dv [hd / 32][16] the V scales; each query's
// weights w[h][b] (16 int16, a pair of positions a 32-bit word; the scales of all (h, b) from one
// transposing tree a group of 8), then per 16 columns the exact
// sums of every pair of positions below valid in int32 (each pair's vectors built once for up to
// three queries), folded into the f32 accumulators. Chunk i asks for line i of the next block's
// K rows of its pairs (pk).
template <class Pairs>
struct I16Values {
  Pairs pairs;
  const float* dv;
  Prefetch pk = {};
  template <int H>
  void add(const float (*ev)[kAttnBlock], const float* corr, int valid, int64_t hd,
           SoftmaxState* st) const {
    const int64_t nb = hd / kQK;
    const int n = H * static_cast<int>(nb);
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff);
    // The |u| bit patterns of (query h, V block b), i = h * nb + b, 8 at a time: their maxima by
    // one transposing tree, i16_scale on 8 lanes at once.
    alignas(32) float up[6 * 256 / kQK], down[6 * 256 / kQK];
    for (int i0 = 0; i0 < n; i0 += 8) {
      __m256i x[8];
      for (int j = 0, h = i0 / static_cast<int>(nb), b = i0 % static_cast<int>(nb); j < 8; ++j) {
        x[j] = _mm256_setzero_si256();
        if (i0 + j >= n) continue;
        const __m256 u0 = _mm256_mul_ps(_mm256_load_ps(ev[h]), _mm256_load_ps(dv + b * kAttnBlock));
        const __m256 u1 =
            _mm256_mul_ps(_mm256_load_ps(ev[h] + 8), _mm256_load_ps(dv + b * kAttnBlock + 8));
        x[j] = _mm256_max_epu32(_mm256_and_si256(_mm256_castps_si256(u0), magnitude),
                                _mm256_and_si256(_mm256_castps_si256(u1), magnitude));
        if (++b == nb) b = 0, ++h;
      }
      const __m256i top = max_of_each(x);
      const __m256i e = _mm256_srli_epi32(top, 23);
      const __m256i ec = _mm256_max_epu32(e, _mm256_set1_epi32(kI16MinExponent));
      const __m256i up_bits =
          _mm256_slli_epi32(_mm256_sub_epi32(_mm256_set1_epi32(kI16UpField), ec), 23);
      const __m256i down_bits = _mm256_blendv_epi8(
          _mm256_slli_epi32(_mm256_sub_epi32(ec, _mm256_set1_epi32(kI16DownBias)), 23),
          _mm256_set1_epi32(kQuietNan), _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(up + i0), up_bits);
      _mm256_store_si256(reinterpret_cast<__m256i*>(down + i0), down_bits);
    }
    alignas(32) int16_t w[H][256 / kQK][kAttnBlock];
    for (int h = 0; h < H; ++h) {
      for (int64_t b = 0; b < nb; ++b) {
        const __m256 scale_up = _mm256_set1_ps(up[h * nb + b]);
        const __m256 u0 = _mm256_mul_ps(_mm256_load_ps(ev[h]), _mm256_load_ps(dv + b * kAttnBlock));
        const __m256 u1 =
            _mm256_mul_ps(_mm256_load_ps(ev[h] + 8), _mm256_load_ps(dv + b * kAttnBlock + 8));
        const __m256i packed = _mm256_packs_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(u0, scale_up)),
                                                  _mm256_cvtps_epi32(_mm256_mul_ps(u1, scale_up)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(w[h][b]),
                           _mm256_permute4x64_epi64(packed, _MM_SHUFFLE(3, 1, 2, 0)));
      }
    }
    const int n_pairs = (valid + 1) / 2;
    for (int64_t c = 0; c < hd; c += 16) {
      sums<std::min(H, 3)>(w, down, nb, corr, n_pairs, c, st, pk);
      if constexpr (H > 3) {
        sums<H - 3>(w + 3, down + 3 * nb, nb, corr + 3, n_pairs, c, st + 3, Prefetch{});
      }
    }
  }

  // The sums of G (1..3) queries over the 16 columns from c: 2G accumulators, the pair's two
  // vectors and a weight (6 queries at once made GCC keep the accumulators on the stack).
  template <int G>
  void sums(const int16_t (*w)[256 / kQK][kAttnBlock], const float* down, int64_t nb,
            const float* corr, int n_pairs, int64_t c, SoftmaxState* st, const Prefetch& pf) const {
    const int64_t b = c / kQK;
    __m256i a[G][2];
    for (int h = 0; h < G; ++h) a[h][0] = a[h][1] = _mm256_setzero_si256();
    for (int k = 0; k < n_pairs; ++k) {
      for (int r = 2 * k; r < 2 * k + 2; ++r) pf.lines_of_row(r, c / 16, c / 16 + 1);
      __m256i lo, hi;
      pairs.load(k, c, lo, hi);
      for (int h = 0; h < G; ++h) {
        int32_t word;
        std::memcpy(&word, &w[h][b][2 * k], sizeof(word));
        const __m256i wk = _mm256_set1_epi32(word);
        a[h][0] = _mm256_dpwssd_avx_epi32(a[h][0], lo, wk);
        a[h][1] = _mm256_dpwssd_avx_epi32(a[h][1], hi, wk);
      }
    }
    for (int h = 0; h < G; ++h) {
      const __m256 dn = _mm256_set1_ps(down[h * nb + b]);
      for (int i = 0; i < 2; ++i) {
        float* o = st[h].acc + c + 8 * i;
        __m256 r = _mm256_loadu_ps(o);
        if (corr[h] != 1.0f) r = _mm256_mul_ps(r, _mm256_set1_ps(corr[h]));
        _mm256_storeu_ps(o, _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[h][i]), dn, r));
      }
    }
  }
};

#endif  // PONDER_AVXVNNI

}  // namespace

#if PONDER_AVXVNNI
void convert_block_q8_0_i8_avxvnni(const uint8_t* const* rows, int n, int64_t hd, K8Block out) {
  if (!BlockAttentionKernels::rows_of_64_take(hd)) {
    block_attention_kernels_scalar().convert_block_q8_0_i8(rows, n, hd, out);
    return;
  }
  convert_k8_rows(RowsZeroPast<uint8_t>(rows, n).rows, hd, out);
}

void attend_block_i8_avxvnni(ConstK8Block k, const float* v, int valid, QueriesQ8 q, int n_q,
                             int64_t hd, float scale, SoftmaxState* st) {
  if (hd % 16 != 0) {
    block_attention_kernels_scalar().attend_block_i8(k, v, valid, q, n_q, hd, scale, st);
    return;
  }
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_i8<h()>(k, F32Values<F32Block>{F32Block{v, hd}}, valid, queries_from(q, h0, hd),
                         hd, scale, st + h0);
  });
}

void convert_block_q8_0_v16_avxvnni(const uint8_t* const* rows, int n, int64_t hd, V16Block out) {
  const RowsZeroPast<uint8_t> z(rows, n);
  const Q8_0RowPairs pairs{z.rows};
  const int64_t nb = hd / kQK;
  for (int k = 0; k < kAttnBlock / 2; ++k) {
    for (int64_t c = 0; c < hd; c += 16) {
      __m256i lo, hi;
      pairs.load(k, c, lo, hi);
      int16_t* at = out.pairs + (k * nb + c / kQK) * 64 + (c % kQK == 0 ? 0 : 16);
      _mm256_store_si256(reinterpret_cast<__m256i*>(at), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(at + 32), hi);
    }
  }
  gather_scales(z.rows, hd, out.scales);
}

void attend_block_i8_v16_avxvnni(ConstK8Block k, ConstV16Block v, int valid, QueriesQ8 q, int n_q,
                                 int64_t hd, float scale, SoftmaxState* st) {
  if (hd % 16 != 0 || hd > 256) {
    block_attention_kernels_scalar().attend_block_i8_v16(k, v, valid, q, n_q, hd, scale, st);
    return;
  }
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_i8<h()>(k, I16Values<V16Pairs>{{v.pairs, hd / kQK}, v.scales}, valid,
                         queries_from(q, h0, hd), hd, scale, st + h0);
  });
}

void attend_block_q8_0_i8_group_avxvnni(const uint8_t* const* krows, const uint8_t* const* vrows,
                                        int valid, QueriesQ8 q, int n_q, int64_t hd, float scale,
                                        SoftmaxState* st, const BlockRows* next) {
  const RowsZeroPast<uint8_t> kz(krows, valid), vz(vrows, valid);
  // The next block's V rows while this one's K is transposed and scored (its K rows: during the
  // V sums).
  if (next != nullptr && valid == kAttnBlock) {
    for (int p = 0; p < kAttnBlock; ++p) Prefetch{next->v, next->v_bytes}.lines_of_row(p, 0, 4);
  }
  alignas(64) uint8_t codes[256 / 4 * 64];
  alignas(64) float scales[256 / kQK * kAttnBlock], dv[256 / kQK * kAttnBlock];
  convert_k8_rows(kz.rows, hd, K8Block{codes, scales});
  gather_scales(vz.rows, hd, dv);
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_i8<h()>(ConstK8Block{codes, scales},
                         I16Values<Q8_0RowPairs>{{vz.rows}, dv, next_k(next, valid, h0)}, valid,
                         queries_from(q, h0, hd), hd, scale, st + h0);
  });
}
#else
void attend_block_group_avx2(const float* k, const float* v, int valid, const float* q, int n_q,
                             int64_t hdp, float scale, SoftmaxState* st, const BlockRows* next) {
  attend_group(F32Block{k, hdp}, F32Block{v, hdp}, valid, q, n_q, hdp, scale, st, next);
}

// The row kernels read K rows by pairs of positions: a row past valid is a zero row (V rows past
// valid are never read).
void attend_block_f16_group_avx2(const uint16_t* const* krows, const uint16_t* const* vrows,
                                 int valid, const float* q, int n_q, int64_t hdp, float scale,
                                 SoftmaxState* st, const BlockRows* next) {
  attend_group(F16Rows{RowsZeroPast<uint16_t>(krows, valid).rows}, F16Rows{vrows}, valid, q, n_q,
               hdp, scale, st, next);
}

void attend_block_q8_0_group_avx2(const uint8_t* const* krows, const uint8_t* const* vrows,
                                  int valid, const float* q, int n_q, int64_t hdp, float scale,
                                  SoftmaxState* st, const BlockRows* next) {
  attend_group(Q8_0Rows{RowsZeroPast<uint8_t>(krows, valid).rows}, Q8_0Rows{vrows}, valid, q, n_q,
               hdp, scale, st, next);
}

// One query vector: the grouped form for one (the same bits).
void attend_block_avx2(const float* k, const float* v, const float* q, int valid, int64_t hdp,
                       float scale, SoftmaxState& st) {
  attend_block_group_avx2(k, v, valid, q, 1, hdp, scale, &st, nullptr);
}
#endif  // PONDER_AVXVNNI

}  // namespace ponder
