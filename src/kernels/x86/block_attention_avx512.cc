// AVX-512 version of the block order's kernels (kernels/block_attention.h), bit for bit the scalar
// reference: a block's 16 scores come out of one transposing tree of shuffles and adds, which adds
// lane j + 8 to lane j, then j + 4, j + 2 and j + 1, for all 16 positions at once.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "kernels/block_attention.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

#include "kernels/ggml_exp.h"
#include "kernels/x86/block_attention_steps.h"
#include "kernels/x86/vec_traits.h"

// exp_nonpositive on 16 lanes: the same fused steps, 2^n built from its bits.
inline __m512 exp16_nonpositive(__m512 x) {
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-86.0f), _CMP_GE_OQ);
  __m512 n;
  const __m512 j = exp_ggml_poly<F32xN<16>>(x, &n);
  const __m512i e =
      _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_maskz_mul_ps(keep, j, _mm512_castsi512_ps(e));
}

// tree16 of one vector: (lane j) + (lane j + 8), then + 4, then (t0 + t2) + (t1 + t3).
inline float tree16(__m512 a) {
  const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
  const __m128 s = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));  // (t0 + t2), (t1 + t3)
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// a and b's lanes paired by two shuffles of 128-bit blocks (kFirst, kSecond) and added.
template <int kFirst, int kSecond>
inline __m512 fold_blocks(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, kFirst), _mm512_shuffle_f32x4(a, b, kSecond));
}
// The same by two shuffles of lanes within each 128-bit block.
template <int kFirst, int kSecond>
inline __m512 fold_lanes(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_shuffle_ps(a, b, kFirst), _mm512_shuffle_ps(a, b, kSecond));
}
// [a.lanes 0-7 + a.lanes 8-15 | b.lanes 0-7 + b.lanes 8-15]
inline __m512 fold8(__m512 a, __m512 b) {
  return fold_blocks<_MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2)>(a, b);
}
// Each 8-lane half of a and b: lanes 0-3 + lanes 4-7 -> [a.h0 | a.h1 | b.h0 | b.h1] (4 lanes each).
inline __m512 fold4(__m512 a, __m512 b) {
  return fold_blocks<_MM_SHUFFLE(2, 0, 2, 0), _MM_SHUFFLE(3, 1, 3, 1)>(a, b);
}
// Within each 128-bit block: [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
inline __m512 fold2(__m512 a, __m512 b) {
  return fold_lanes<_MM_SHUFFLE(1, 0, 1, 0), _MM_SHUFFLE(3, 2, 3, 2)>(a, b);
}
// Within each 128-bit block: [a0 + a1, a2 + a3, b0 + b1, b2 + b3].
inline __m512 fold1(__m512 a, __m512 b) {
  return fold_lanes<_MM_SHUFFLE(2, 0, 2, 0), _MM_SHUFFLE(3, 1, 3, 1)>(a, b);
}

}  // namespace

namespace {

// f32(d) * q for elements [j, j + 16) of a Q8_0 block: one rounding.
inline __m512 q8_0_values16(const BlockQ8_0& b, int j) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.qs + j));
  return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(b.d)), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)));
}

// The first min(16, max(0, n)) lanes.
inline __mmask16 first_lanes(int64_t n) {
  return n <= 0 ? 0 : n >= 16 ? 0xffff : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace

void convert_block_avx512(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp, float* out) {
  rows_or_zeros(n, hdp, out, [&](int p, float* o) {
    int64_t i = 0;
    for (; i + 16 <= hd; i += 16) {
      _mm512_storeu_ps(
          o + i,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[p] + i))));
    }
    if (i < hd) {
      const __mmask16 m = static_cast<__mmask16>((1u << (hd - i)) - 1);
      _mm512_storeu_ps(o + i, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, rows[p] + i)));
    }
  });
}

void convert_block_q8_0_avx512(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp,
                               float* out) {
  rows_or_zeros(n, hdp, out, [&](int p, float* o) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(rows[p]);
    for (int64_t b = 0; b < hd / kQK; ++b) {
      for (int j = 0; j < kQK; j += 16) _mm512_storeu_ps(o + b * kQK + j, q8_0_values16(blk[b], j));
    }
  });
}

void fold_avx512(float* o, const float* acc, float a, float b, int64_t hdp) {
  const __m512 av = _mm512_set1_ps(a), bv = _mm512_set1_ps(b);
  for (int64_t i = 0; i < hdp; i += 16) {
    _mm512_storeu_ps(o + i, _mm512_fmadd_ps(_mm512_loadu_ps(acc + i), bv,
                                            _mm512_mul_ps(_mm512_loadu_ps(o + i), av)));
  }
}

namespace {

// The softmax step of the header for H queries at once (scores unscaled), step by step across
// the queries so that their latency chains overlap (one query after another left them serial),
// the corrections of all H from one exp16: updates st[h].m and st[h].l, writes e (zeros past
// valid) to ev[h] and the correction of the accumulator to corr[h].
template <int H>
inline void softmax_steps(const __m512 (&scores)[H], int valid, float scale, SoftmaxState* st,
                          float (*ev)[kAttnBlock], float* corr) {
  const __mmask16 live = static_cast<__mmask16>((1u << valid) - 1);
  __m512 s[H];
  float m_new[H];
  alignas(64) float diff[16] = {};
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) s[h] = _mm512_mul_ps(scores[h], _mm512_set1_ps(scale));
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) m_new[h] = std::max(st[h].m, _mm512_mask_reduce_max_ps(live, s[h]));
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) diff[h] = st[h].m == -INFINITY ? 0.0f : st[h].m - m_new[h];
  alignas(64) float c[16];
  _mm512_store_ps(c, exp16_nonpositive(_mm512_load_ps(diff)));
  __m512 e[H];
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) {
    e[h] =
        _mm512_maskz_mov_ps(live, exp16_nonpositive(_mm512_sub_ps(s[h], _mm512_set1_ps(m_new[h]))));
  }
#pragma GCC unroll 16
  for (int h = 0; h < H; ++h) {
    corr[h] = st[h].m == -INFINITY ? 0.0f : c[h];
    st[h].l = st[h].l * corr[h] + tree16(e[h]);
    st[h].m = m_new[h];
    _mm512_store_ps(ev[h], e[h]);
  }
}

// The K or V rows of a block, as the fused form reads them: f16 rows converted in registers
// (decode, straight from the cache) or a block already converted to f32 [16][hdp] (prompts).
struct F16Rows {
  const uint16_t* const* rows;
  __m512 load(int p, int64_t d) const {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[p] + d)));
  }
};
// Q8_0 rows (decode, straight from the cache): f32(d) * q in registers, convert_block_q8_0's bits.
struct Q8_0Rows {
  const uint8_t* const* rows;
  __m512 load(int p, int64_t d) const {
    return q8_0_values16(reinterpret_cast<const BlockQ8_0*>(rows[p])[d / kQK],
                         static_cast<int>(d % kQK));
  }
};
struct F32Block {
  const float* base;
  int64_t hdp;
  __m512 load(int p, int64_t d) const { return _mm512_loadu_ps(base + p * hdp + d); }
};

// a[h] = the C accumulator vectors of query h from column c0, times corr[h] where it is not 1.
template <int H, int C>
inline void load_scaled(const SoftmaxState* st, const float* corr, int64_t c0, __m512 (&a)[H][C]) {
  for (int h = 0; h < H; ++h) {
    for (int c = 0; c < C; ++c) a[h][c] = _mm512_loadu_ps(st[h].acc + c0 + 16 * c);
    if (corr[h] != 1.0f) {
      const __m512 cv = _mm512_set1_ps(corr[h]);
      for (int c = 0; c < C; ++c) a[h][c] = _mm512_mul_ps(a[h][c], cv);
    }
  }
}
template <int H, int C>
inline void store_acc(const __m512 (&a)[H][C], int64_t c0, SoftmaxState* st) {
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c) _mm512_storeu_ps(st[h].acc + c0 + 16 * c, a[h][c]);
}

// acc[h] (C vectors from column c0) times corr[h] where it is not 1, plus e[h][p] V[p] for
// p < valid: add_values for H queries at once, each V vector loaded once for all of them.
template <int H, int C, class Rows>
inline void add_values_group(const Rows& v, const float (*ev)[kAttnBlock], const float* corr,
                             int valid, int64_t c0, SoftmaxState* st, const Prefetch& pf = {},
                             int64_t line0 = 0) {
  __m512 a[H][C];
  load_scaled<H, C>(st, corr, c0, a);
  for (int p = 0; p < valid; ++p) {
    pf.lines_of_row(p, line0, line0 + 2);
    __m512 vv[C];
    for (int c = 0; c < C; ++c) vv[c] = v.load(p, c0 + 16 * c);
    for (int h = 0; h < H; ++h) {
      const __m512 w = _mm512_set1_ps(ev[h][p]);
      for (int c = 0; c < C; ++c) a[h][c] = _mm512_fmadd_ps(w, vv[c], a[h][c]);
    }
  }
  store_acc<H, C>(a, c0, st);
}

// The V sums in f32 (the header's order): add_values_group over chunks of 64 columns, then of 16;
// chunk i prefetches lines 2i and 2i + 1 of pf's rows.
template <class Rows>
struct F32Values {
  Rows rows;
  Prefetch pf = {};
  template <int H>
  void add(const float (*ev)[kAttnBlock], const float* corr, int valid, int64_t hdp,
           SoftmaxState* st) const {
    int64_t c0 = 0;
    for (; c0 + 64 <= hdp; c0 += 64)
      add_values_group<H, 4>(rows, ev, corr, valid, c0, st, pf, c0 / 32);
    for (; c0 < hdp; c0 += 16) add_values_group<H, 1>(rows, ev, corr, valid, c0, st);
  }
};

// The V sums of a bf16 cache (block_attention.h): for each pair of positions (2k, 2k + 1) below
// valid, V's two rows interleaved (lane i: V[2k][i] low, V[2k + 1][i] high) meet each query's pair
// of bf16 weights: one vdpbf16ps per 16 columns and pair, each interleaved V vector shared by the
// H queries. Columns in chunks of 64, then 32 (hd a multiple of 32); rows past valid are zero rows.
struct Bf16PairValues {
  const uint16_t* const* vrows;
  int64_t hd;
  Prefetch pf;  // the same columns (bytes) of rows 2k, 2k + 1

  // NB blocks in turn (rows 16b ..): for each, acc times corr[b][h] where it is not 1, then its
  // n_pairs[b] pairs with the weights hi[h][8b + k]; the accumulators loaded and stored once.
  template <int H, int C, int NB>
  void add_chunk(const uint32_t (*hi)[kAttnStepBf16 / 2], const float (*corr)[H],
                 const int* n_pairs, int64_t c0, SoftmaxState* st) const {
    // Lanes 0-15 of the interleave take elements 0-15 of the two rows alternately, lanes 16-31
    // elements 16-31.
    const __m512i take_lo =
        _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7, 38, 6,
                         37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
    const __m512i take_hi = _mm512_add_epi16(take_lo, _mm512_set1_epi16(16));
    __m512 a[H][C];
    for (int h = 0; h < H; ++h)
      for (int c = 0; c < C; ++c) a[h][c] = _mm512_loadu_ps(st[h].acc + c0 + 16 * c);
    for (int b = 0; b < NB; ++b) {
      for (int h = 0; h < H; ++h) {
        if (corr[b][h] == 1.0f) continue;
        const __m512 cv = _mm512_set1_ps(corr[b][h]);
        for (int c = 0; c < C; ++c) a[h][c] = _mm512_mul_ps(a[h][c], cv);
      }
      for (int k = 8 * b; k < 8 * b + n_pairs[b]; ++k) {
        for (int r = 2 * k; r < 2 * k + 2; ++r) pf.lines_of_row(r, c0 / 32, (c0 + 16 * C) / 32);
        __m512bh vv[C];
        for (int c = 0; c < C; c += 2) {
          const __m512i r0 = _mm512_loadu_si512(vrows[2 * k] + c0 + 16 * c);
          const __m512i r1 = _mm512_loadu_si512(vrows[2 * k + 1] + c0 + 16 * c);
          vv[c] = (__m512bh)_mm512_permutex2var_epi16(r0, take_lo, r1);
          vv[c + 1] = (__m512bh)_mm512_permutex2var_epi16(r0, take_hi, r1);
        }
        for (int h = 0; h < H; ++h) {
          const __m512bh wh = (__m512bh)_mm512_set1_epi32(static_cast<int>(hi[h][k]));
          for (int c = 0; c < C; ++c) a[h][c] = _mm512_dpbf16_ps(a[h][c], vv[c], wh);
        }
      }
    }
    store_acc<H, C>(a, c0, st);
  }

  // NB (1 or 2) blocks' weights ev[b] [H][16] with their corrections corr[b] and `valid` positions
  // in all (the first block full when NB = 2).
  template <int H, int NB = 1>
  void add_blocks(const float (*const* ev)[kAttnBlock], const float (*corr)[H], int valid,
                  SoftmaxState* st) const {
    alignas(64) uint32_t hi[H][kAttnStepBf16 / 2];
    int n_pairs[NB];
    for (int b = 0; b < NB; ++b) {
      for (int h = 0; h < H; ++h) {
        _mm256_store_si256(reinterpret_cast<__m256i*>(hi[h] + 8 * b),
                           (__m256i)_mm512_cvtneps_pbh(_mm512_load_ps(ev[b][h])));
      }
      n_pairs[b] = (std::min(valid - kAttnBlock * b, kAttnBlock) + 1) / 2;
    }
    int64_t c0 = 0;
    for (; c0 + 64 <= hd; c0 += 64) add_chunk<H, 4, NB>(hi, corr, n_pairs, c0, st);
    for (; c0 < hd; c0 += 32) add_chunk<H, 2, NB>(hi, corr, n_pairs, c0, st);
  }

  template <int H>
  void add(const float (*ev)[kAttnBlock], const float* corr, int valid, int64_t,
           SoftmaxState* st) const {
    const float(*evs[1])[kAttnBlock] = {ev};
    float c[1][H];
    std::copy(corr, corr + H, c[0]);
    add_blocks<H, 1>(evs, c, valid, st);
  }
};

// The chains of the scores' group g (positions g + 4j, j < 4) for H query vectors: over the ops.n
// elements of a K row, per step of Ops::kStep, each K vector loaded once for the H queries and
// Ops::product(acc, k, q) taken; step i asks for line i of the next block's rows g + 4j (pf).
template <int H, class Ops>
struct ChainScores {
  Ops ops;
  Prefetch pf = {};
  void group(int g, __m512 (&a)[4][H]) const {
    for (int64_t d = 0; d < ops.n; d += Ops::kStep) {
      for (int j = 0; j < 4; ++j) pf.lines_of_row(g + 4 * j, d / Ops::kStep, d / Ops::kStep + 1);
      typename Ops::Vec kv[4];
      for (int j = 0; j < 4; ++j) kv[j] = ops.k(g + 4 * j, d);
      for (int h = 0; h < H; ++h) {
        const typename Ops::Vec qv = ops.q(h, d);
        for (int j = 0; j < 4; ++j) a[j][h] = Ops::product(a[j][h], kv[j], qv);
      }
    }
  }
};

// The f32 scores: K from Rows, q [H][n] f32 (n = hdp), 16 elements a step.
template <class Rows>
struct F32ScoreOps {
  using Vec = __m512;
  static constexpr int kStep = 16;
  const Rows& rows;
  const float* qf;
  int64_t n;
  Vec k(int p, int64_t d) const { return rows.load(p, d); }
  Vec q(int h, int64_t d) const { return _mm512_loadu_ps(qf + h * n + d); }
  static __m512 product(__m512 acc, Vec k, Vec q) { return _mm512_fmadd_ps(k, q, acc); }
};
template <int H, class Rows>
ChainScores<H, F32ScoreOps<Rows>> f32_scores(const Rows& k, const float* q, int64_t hdp,
                                             Prefetch pf = {}) {
  return {{k, q, hdp}, pf};
}

// The bf16 scores (block_attention.h): the block's 16 bf16 K rows krows[p] [n] and qb [H][n]
// (n = hdp32), one vdpbf16ps per 32 elements.
struct Bf16ScoreOps {
  using Vec = __m512bh;
  static constexpr int kStep = 32;
  const uint16_t* const* krows;
  const uint16_t* qb;
  int64_t n;
  Vec k(int p, int64_t d) const { return (__m512bh)_mm512_loadu_si512(krows[p] + d); }
  Vec q(int h, int64_t d) const { return (__m512bh)_mm512_loadu_si512(qb + h * n + d); }
  static __m512 product(__m512 acc, Vec k, Vec q) { return _mm512_dpbf16_ps(acc, k, q); }
};
template <int H>
ChainScores<H, Bf16ScoreOps> bf16_scores(const uint16_t* const* krows, const uint16_t* qb,
                                         int64_t hdp32, Prefetch pf = {}) {
  return {{krows, qb, hdp32}, pf};
}

// The fused form for H (1..6) query vectors that see the same `valid` positions: the scores'
// chains and tree for every query, with each K vector loaded (or converted) once and used by all
// H; positions p >= valid are masked like the reference's (their lanes never reach the softmax).
// Group g holds positions g, g + 4, g + 8, g + 12, whose chains the tree folds into one vector
// (abcd, efgh, ijkl, mnop: position p ends in lane p). hdp a multiple of 16.
template <int H, class Scores>
inline void block_scores(const Scores& scores, __m512 (&s)[H]) {
  __m512 grp[4][H];
  for (int g = 0; g < 4; ++g) {
    __m512 a[4][H];
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < H; ++h) a[j][h] = _mm512_setzero_ps();
    scores.group(g, a);
    for (int h = 0; h < H; ++h) grp[g][h] = fold4(fold8(a[0][h], a[1][h]), fold8(a[2][h], a[3][h]));
  }
  for (int h = 0; h < H; ++h)
    s[h] = fold1(fold2(grp[0][h], grp[1][h]), fold2(grp[2][h], grp[3][h]));
}

template <int H, class Scores, class Values>
void attend_heads_with(const Scores& scores, const Values& v, int valid, int64_t hdp, float scale,
                       SoftmaxState* st) {
  alignas(64) float ev[H][kAttnBlock];
  float corr[H];
  __m512 s[H];
  block_scores<H>(scores, s);
  softmax_steps<H>(s, valid, scale, st, ev, corr);
  v.template add<H>(ev, corr, valid, hdp, st);
}

// A step of the bf16-cache variant over 17..32 positions, two blocks in turn (block_attention.h):
// both blocks' scores (the first with the next step's V rows 0-15 prefetched, the second with
// 16-31), the two softmax steps, then one V pass for both (the next step's K rows prefetched).
template <int H>
void attend_heads_bf16kv_pair(const uint16_t* const* kr, const uint16_t* const* vr, int valid,
                              const uint16_t* qb, int64_t hd, float scale, SoftmaxState* st,
                              const BlockRows* next) {
  const Prefetch pv0 = next != nullptr ? Prefetch{next->v, next->v_bytes} : Prefetch{};
  const Prefetch pv1 = next != nullptr ? Prefetch{next->v + kAttnBlock, next->v_bytes} : Prefetch{};
  const Prefetch pk = next != nullptr ? Prefetch{next->k, next->k_bytes} : Prefetch{};
  __m512 s0[H], s1[H];
  block_scores<H>(bf16_scores<H>(kr, qb, hd, pv0), s0);
  block_scores<H>(bf16_scores<H>(kr + kAttnBlock, qb, hd, pv1), s1);
  alignas(64) float ev0[H][kAttnBlock], ev1[H][kAttnBlock];
  float corr[2][H];
  softmax_steps<H>(s0, kAttnBlock, scale, st, ev0, corr[0]);
  softmax_steps<H>(s1, valid - kAttnBlock, scale, st, ev1, corr[1]);
  const float(*evs[2])[kAttnBlock] = {ev0, ev1};
  Bf16PairValues{vr, hd, pk}.add_blocks<H, 2>(evs, corr, valid, st);
}

// The fused form for n_q queries with f32 scores.
template <class Rows>
void attend_group(const Rows& k, const Rows& v, int valid, const float* q, int n_q, int64_t hdp,
                  float scale, SoftmaxState* st, const BlockRows* next) {
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_with<h()>(f32_scores<h()>(k, q + h0 * hdp, hdp, next_v(next, valid, h0)),
                           F32Values<Rows>{v, next_k(next, valid, h0)}, valid, hdp, scale, st + h0);
  });
}

// The same with bf16 scores.
template <class Rows>
void attend_group_bf16(const uint16_t* const* krows, const Rows& v, int valid, const uint16_t* qb,
                       int n_q, int64_t hdp, int64_t hdp32, float scale, SoftmaxState* st) {
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_with<h()>(bf16_scores<h()>(krows, qb + h0 * hdp32, hdp32), F32Values<Rows>{v},
                           valid, hdp, scale, st + h0);
  });
}

}  // namespace

void attend_block_avx512(const float* k, const float* v, const float* q, int valid, int64_t hdp,
                         float scale, SoftmaxState& st) {
  attend_group(F32Block{k, hdp}, F32Block{v, hdp}, valid, q, 1, hdp, scale, &st, nullptr);
}

void attend_block_f16_group_avx512(const uint16_t* const* krows, const uint16_t* const* vrows,
                                   int valid, const float* q, int n_q, int64_t hdp, float scale,
                                   SoftmaxState* st, const BlockRows* next) {
  const RowsZeroPast<uint16_t> kr(krows, valid);
  attend_group(F16Rows{kr.rows}, F16Rows{vrows}, valid, q, n_q, hdp, scale, st, next);
}

void attend_block_q8_0_group_avx512(const uint8_t* const* krows, const uint8_t* const* vrows,
                                    int valid, const float* q, int n_q, int64_t hdp, float scale,
                                    SoftmaxState* st, const BlockRows* next) {
  const RowsZeroPast<uint8_t> kr(krows, valid), vr(vrows, valid);
  attend_group(Q8_0Rows{kr.rows}, Q8_0Rows{vr.rows}, valid, q, n_q, hdp, scale, st, next);
}

void attend_block_group_avx512(const float* k, const float* v, int valid, const float* q, int n_q,
                               int64_t hdp, float scale, SoftmaxState* st, const BlockRows* next) {
  attend_group(F32Block{k, hdp}, F32Block{v, hdp}, valid, q, n_q, hdp, scale, st, next);
}

// bf16 of f16 rows: exact in f32 (an f16 is never an f32 subnormal), then rounded to nearest even.
void convert_block_bf16_avx512bf16(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp32,
                                   uint16_t* kb) {
  for (int p = 0; p < kAttnBlock; ++p) {
    uint16_t* o = kb + p * hdp32;
    for (int64_t i = 0; i < hdp32; i += 32) {
      __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
      if (p < n) {
        lo = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_lanes(hd - i), rows[p] + i));
        hi = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_lanes(hd - i - 16), rows[p] + i + 16));
      }
      _mm512_storeu_si512(o + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
  }
}

// bf16 of Q8_0 rows: f32(d) * q (exact: 11 by 8 bits), rounded to nearest even.
void convert_block_q8_0_bf16_avx512bf16(const uint8_t* const* rows, int n, int64_t hd,
                                        int64_t hdp32, uint16_t* kb) {
  rows_or_zeros(n, hdp32, kb, [&](int p, uint16_t* o) {
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(rows[p]);
    for (int64_t b = 0; b < hd / kQK; ++b) {
      _mm512_storeu_si512(o + b * kQK, (__m512i)_mm512_cvtne2ps_pbh(q8_0_values16(blk[b], 16),
                                                                    q8_0_values16(blk[b], 0)));
    }
  });
}

void attend_block_bf16_group_avx512bf16(const uint16_t* const* krows, const float* v, int valid,
                                        const uint16_t* qb, int n_q, int64_t hdp, int64_t hdp32,
                                        float scale, SoftmaxState* st) {
  attend_group_bf16(krows, F32Block{v, hdp}, valid, qb, n_q, hdp, hdp32, scale, st);
}

void attend_block_bf16_f16_group_avx512bf16(const uint16_t* const* krows,
                                            const uint16_t* const* vrows, int valid,
                                            const uint16_t* qb, int n_q, int64_t hdp, int64_t hdp32,
                                            float scale, SoftmaxState* st) {
  attend_group_bf16(krows, F16Rows{vrows}, valid, qb, n_q, hdp, hdp32, scale, st);
}

void attend_block_bf16kv_group_avx512bf16(const uint16_t* const* krows,
                                          const uint16_t* const* vrows, int valid,
                                          const uint16_t* qb, int n_q, int64_t hd, float scale,
                                          SoftmaxState* st, const BlockRows* next) {
  const RowsZeroPast<uint16_t> kz(krows, valid, kAttnStepBf16), vz(vrows, valid, kAttnStepBf16);
  const uint16_t* const* kr = kz.rows;
  const uint16_t* const* vr = vz.rows;
  if (valid > kAttnBlock) {
    in_sixes(n_q, [&](auto h, int h0) {
      attend_heads_bf16kv_pair<h()>(kr, vr, valid, qb + h0 * hd, hd, scale, st + h0,
                                    h0 == 0 && valid == kAttnStepBf16 ? next : nullptr);
    });
    return;
  }
  // At most 16 positions: one block (the same bits).
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_with<h()>(bf16_scores<h()>(kr, qb + h0 * hd, hd, next_v(next, valid, h0)),
                           Bf16PairValues{vr, hd, next_k(next, valid, h0)}, valid, hd, scale,
                           st + h0);
  });
}

// The int8-scores variant (block_attention.h), AVX512_VNNI.
namespace {

// out[c] lane p = in[p] lane c, for 16 vectors of 16 32-bit lanes: pairs of rows interleaved by
// lanes, then by pairs of lanes, then the 128-bit blocks gathered in two steps.
inline void transpose16x16_epi32(__m512i (&r)[16]) {
  __m512i a[16], b[16];
  for (int i = 0; i < 8; ++i) {
    a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // b[4i + j], 128-bit block k: rows 4i .. 4i + 3 of column 4k + j.
  for (int i = 0; i < 4; ++i) {
    b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
    b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
    b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i c0 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0x44);  // blocks 0, 1 of each
    const __m512i c1 = _mm512_shuffle_i32x4(b[j], b[4 + j], 0xee);  // blocks 2, 3
    const __m512i d0 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0x44);
    const __m512i d1 = _mm512_shuffle_i32x4(b[8 + j], b[12 + j], 0xee);
    r[j] = _mm512_shuffle_i32x4(c0, d0, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(c0, d0, 0xdd);
    r[8 + j] = _mm512_shuffle_i32x4(c1, d1, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(c1, d1, 0xdd);
  }
}

// scales[b * 16 + p] = f32 of the 16 rows' block scales, b < hd / 32.
inline void gather_scales(const uint8_t* const* rows, int64_t hd, float* scales) {
  for (int64_t b = 0; b < hd / kQK; ++b) {
    alignas(32) uint16_t d[kAttnBlock];
    for (int p = 0; p < kAttnBlock; ++p) d[p] = reinterpret_cast<const BlockQ8_0*>(rows[p])[b].d;
    _mm512_store_ps(scales + b * kAttnBlock,
                    _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(d))));
  }
}

// convert_block_q8_0_i8 for 16 rows (the caller points the rows past n at zero blocks): per 64
// dimensions (two Q8_0 blocks) the 16 rows' codes + 128 transposed by groups of 4 bytes.
inline void convert_k8_rows(const uint8_t* const* rows, int64_t hd, K8Block out) {
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (int64_t t = 0; t < hd / 64; ++t) {
    __m512i r[16];
    for (int p = 0; p < kAttnBlock; ++p) {
      const auto* blocks = reinterpret_cast<const BlockQ8_0*>(rows[p]) + 2 * t;
      const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[0].qs));
      const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blocks[1].qs));
      r[p] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1), offset);
    }
    transpose16x16_epi32(r);
    for (int c = 0; c < 16; ++c) _mm512_store_si512(out.codes + (16 * t + c) * 64, r[c]);
  }
  gather_scales(rows, hd, out.scales);
}

// The 16 positions' scores (unscaled) of H query vectors from a K8Block: per Q8_0 block, the
// exact integer sums by vpdpbusd (K's codes + 128 unsigned, the query's signed, started from
// -128 * the query block's sum), then one fma with the product of the scales.
template <int H>
inline void i8_scores(ConstK8Block k, QueriesQ8 q, int64_t hd, __m512 (&s)[H]) {
  const int64_t nb = hd / kQK;
  for (int h = 0; h < H; ++h) s[h] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    __m512i acc[H];
    for (int h = 0; h < H; ++h) acc[h] = _mm512_set1_epi32(-128 * q.qsum[h * nb + b]);
    for (int g = 0; g < kQK / 4; ++g) {
      const __m512i kv = _mm512_load_si512(k.codes + (b * (kQK / 4) + g) * 64);
      for (int h = 0; h < H; ++h) {
        int32_t word;
        std::memcpy(&word, q.q[h * nb + b].qs + 4 * g, sizeof(word));
        acc[h] = _mm512_dpbusd_epi32(acc[h], kv, _mm512_set1_epi32(word));
      }
    }
    const __m512 kd = _mm512_load_ps(k.scales + b * kAttnBlock);
    for (int h = 0; h < H; ++h) {
      const __m512 d = _mm512_mul_ps(kd, _mm512_set1_ps(_cvtsh_ss(q.q[h * nb + b].d)));
      s[h] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[h]), d, s[h]);
    }
  }
}

// Lane j = the largest uint32 lane of x[j], for 16 vectors at once: pairs of vectors folded by
// 128-bit blocks (8 lanes each left), then by blocks again (4), by pairs of lanes (2) and by lanes
// (1), which leaves x[4m + k] in lane 4k + m; one permutation puts it in lane 4m + k.
inline __m512i max_of_each(const __m512i (&x)[16]) {
  const auto by_blocks = [](__m512i a, __m512i b, auto lo, auto hi) {
    return _mm512_max_epu32(_mm512_shuffle_i32x4(a, b, lo()), _mm512_shuffle_i32x4(a, b, hi()));
  };
  const auto by_lanes = [](__m512i a, __m512i b, auto lo, auto hi) {
    const __m512 fa = _mm512_castsi512_ps(a), fb = _mm512_castsi512_ps(b);
    return _mm512_max_epu32(_mm512_castps_si512(_mm512_shuffle_ps(fa, fb, lo())),
                            _mm512_castps_si512(_mm512_shuffle_ps(fa, fb, hi())));
  };
  using std::integral_constant;
  __m512i y[8], z[4], w[2];
  for (int i = 0; i < 8; ++i) {
    y[i] = by_blocks(x[2 * i], x[2 * i + 1], integral_constant<int, 0x44>(),
                     integral_constant<int, 0xee>());
  }
  for (int i = 0; i < 4; ++i) {
    z[i] = by_blocks(y[2 * i], y[2 * i + 1], integral_constant<int, 0x88>(),
                     integral_constant<int, 0xdd>());
  }
  for (int i = 0; i < 2; ++i) {
    w[i] = by_lanes(z[2 * i], z[2 * i + 1], integral_constant<int, _MM_SHUFFLE(1, 0, 1, 0)>(),
                    integral_constant<int, _MM_SHUFFLE(3, 2, 3, 2)>());
  }
  const __m512i r = by_lanes(w[0], w[1], integral_constant<int, _MM_SHUFFLE(2, 0, 2, 0)>(),
                             integral_constant<int, _MM_SHUFFLE(3, 1, 3, 1)>());
  return _mm512_permutexvar_epi32(
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), r);
}

// The int16 V sums' pairs of positions (2k, 2k + 1) of V block b as vpdpwssd takes them (the
// two vectors t = 0, 1 of v16_index): from a V16Block (prompts) or from the Q8_0 rows (decode,
// the rows' 32 codes interleaved by bytes and sign-extended, which is the V16Block's order).
struct V16Pairs {
  const int16_t* pairs;
  int64_t nb;
  void load(int k, int64_t b, __m512i& lo, __m512i& hi) const {
    const int16_t* at = pairs + (k * nb + b) * 64;
    lo = _mm512_load_si512(at);
    hi = _mm512_load_si512(at + 32);
  }
};
struct Q8_0RowPairs {
  const uint8_t* const* rows;
  void load(int k, int64_t b, __m512i& lo, __m512i& hi) const {
    const auto codes = [&](int p) {
      return _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(reinterpret_cast<const BlockQ8_0*>(rows[p])[b].qs));
    };
    const __m256i a = codes(2 * k), c = codes(2 * k + 1);
    lo = _mm512_cvtepi8_epi16(_mm256_unpacklo_epi8(a, c));
    hi = _mm512_cvtepi8_epi16(_mm256_unpackhi_epi8(a, c));
  }
};

// The int16 V sums (block_attention.h) for H queries: dv [hd / 32][16] the V scales, the pairs
// from Pairs; each query's weights w[h][b] (16 int16, a pair of positions a 32-bit word, the
// operand vpdpwssd broadcasts), then per V block the exact sums of every pair of positions below
// valid in int32 (each pair's vectors loaded once for the H queries; 2H accumulators, as 4H
// made GCC copy each through the stack), folded into the f32 accumulators in column order
// (vpdpwssd's lanes hold columns 0-7, 16-23 and 8-15, 24-31 of a V block). pf: the next block's
// K rows, line b during V block b.
template <class Pairs>
struct I16Values {
  Pairs pairs;
  const float* dv;
  Prefetch pf = {};
  template <int H>
  void add(const float (*ev)[kAttnBlock], const float* corr, int valid, int64_t hd,
           SoftmaxState* st) const {
    const int64_t nb = hd / kQK;
    // The scales of every (query, V block) i = h * nb + b, 16 at a time: the |u| bit patterns'
    // maxima by one transposing tree, i16_scale on the 16 lanes at once.
    const int n = H * static_cast<int>(nb);
    __m512 e[H];
    for (int h = 0; h < H; ++h) e[h] = _mm512_load_ps(ev[h]);
    alignas(64) float up[6 * 256 / kQK], down[6 * 256 / kQK];
    for (int i0 = 0; i0 < n; i0 += 16) {
      __m512i x[16];
      for (int j = 0, h = i0 / static_cast<int>(nb), b = i0 % static_cast<int>(nb); j < 16; ++j) {
        x[j] = _mm512_setzero_si512();
        if (i0 + j >= n) continue;
        x[j] = _mm512_and_si512(
            _mm512_castps_si512(_mm512_mul_ps(e[h], _mm512_load_ps(dv + b * kAttnBlock))),
            _mm512_set1_epi32(0x7fffffff));
        if (++b == nb) b = 0, ++h;
      }
      const __m512i top = max_of_each(x);
      const __m512i ex = _mm512_srli_epi32(top, 23);
      const __m512i ec = _mm512_max_epu32(ex, _mm512_set1_epi32(kI16MinExponent));
      const __m512i up_bits =
          _mm512_slli_epi32(_mm512_sub_epi32(_mm512_set1_epi32(kI16UpField), ec), 23);
      const __m512i down_bits = _mm512_mask_mov_epi32(
          _mm512_slli_epi32(_mm512_sub_epi32(ec, _mm512_set1_epi32(kI16DownBias)), 23),
          _mm512_cmpeq_epi32_mask(ex, _mm512_set1_epi32(255)), _mm512_set1_epi32(kQuietNan));
      _mm512_store_ps(up + i0, _mm512_castsi512_ps(up_bits));
      _mm512_store_ps(down + i0, _mm512_castsi512_ps(down_bits));
    }
    alignas(64) int16_t w[H][256 / kQK][kAttnBlock];
    for (int h = 0; h < H; ++h) {
      for (int64_t b = 0; b < nb; ++b) {
        const __m512 u = _mm512_mul_ps(e[h], _mm512_load_ps(dv + b * kAttnBlock));
        _mm256_store_si256(reinterpret_cast<__m256i*>(w[h][b]),
                           _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(
                               _mm512_mul_ps(u, _mm512_set1_ps(up[h * nb + b])))));
      }
    }
    const int n_pairs = (valid + 1) / 2;
    for (int64_t b = 0; b < nb; ++b) {
      __m512i lo[H], hi[H];
      for (int h = 0; h < H; ++h) lo[h] = hi[h] = _mm512_setzero_si512();
      for (int k = 0; k < n_pairs; ++k) {
        for (int r = 2 * k; r < 2 * k + 2; ++r) pf.lines_of_row(r, b, b + 1);
        __m512i v0, v1;
        pairs.load(k, b, v0, v1);
        for (int h = 0; h < H; ++h) {
          int32_t word;
          std::memcpy(&word, &w[h][b][2 * k], sizeof(word));
          const __m512i wk = _mm512_set1_epi32(word);
          lo[h] = _mm512_dpwssd_epi32(lo[h], v0, wk);
          hi[h] = _mm512_dpwssd_epi32(hi[h], v1, wk);
        }
      }
      for (int h = 0; h < H; ++h) {
        const __m512 dn = _mm512_set1_ps(down[h * nb + b]);
        const __m512i x[2] = {_mm512_shuffle_i64x2(lo[h], hi[h], 0x44),
                              _mm512_shuffle_i64x2(lo[h], hi[h], 0xee)};
        for (int i = 0; i < 2; ++i) {
          float* o = st[h].acc + b * kQK + 16 * i;
          __m512 r = _mm512_loadu_ps(o);
          if (corr[h] != 1.0f) r = _mm512_mul_ps(r, _mm512_set1_ps(corr[h]));
          _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(x[i]), dn, r));
        }
      }
    }
  }
};

template <int H, class Values>
void attend_heads_i8(ConstK8Block k, const Values& v, int valid, QueriesQ8 q, int64_t hd,
                     float scale, SoftmaxState* st) {
  alignas(64) float ev[H][kAttnBlock];
  float corr[H];
  __m512 s[H];
  i8_scores<H>(k, q, hd, s);
  softmax_steps<H>(s, valid, scale, st, ev, corr);
  v.template add<H>(ev, corr, valid, hd, st);
}

}  // namespace

void convert_block_q8_0_i8_avx512(const uint8_t* const* rows, int n, int64_t hd, K8Block out) {
  if (hd % 64 != 0 || hd > 256) {
    block_attention_kernels_scalar().convert_block_q8_0_i8(rows, n, hd, out);
    return;
  }
  convert_k8_rows(RowsZeroPast<uint8_t>(rows, n).rows, hd, out);
}

void attend_block_i8_avx512vnni(ConstK8Block k, const float* v, int valid, QueriesQ8 q, int n_q,
                                int64_t hd, float scale, SoftmaxState* st) {
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_i8<h()>(k, F32Values<F32Block>{F32Block{v, hd}}, valid, queries_from(q, h0, hd),
                         hd, scale, st + h0);
  });
}

void convert_block_q8_0_v16_avx512(const uint8_t* const* rows, int n, int64_t hd, V16Block out) {
  if (hd > 256) {
    block_attention_kernels_scalar().convert_block_q8_0_v16(rows, n, hd, out);
    return;
  }
  const RowsZeroPast<uint8_t> z(rows, n);
  const Q8_0RowPairs pairs{z.rows};
  const int64_t nb = hd / kQK;
  for (int k = 0; k < kAttnBlock / 2; ++k) {
    for (int64_t b = 0; b < nb; ++b) {
      __m512i lo, hi;
      pairs.load(k, b, lo, hi);
      _mm512_store_si512(out.pairs + (k * nb + b) * 64, lo);
      _mm512_store_si512(out.pairs + (k * nb + b) * 64 + 32, hi);
    }
  }
  gather_scales(z.rows, hd, out.scales);
}

void attend_block_i8_v16_avx512vnni(ConstK8Block k, ConstV16Block v, int valid, QueriesQ8 q,
                                    int n_q, int64_t hd, float scale, SoftmaxState* st) {
  if (!BlockAttentionKernels::rows_of_64_take(hd)) {
    block_attention_kernels_scalar().attend_block_i8_v16(k, v, valid, q, n_q, hd, scale, st);
    return;
  }
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_i8<h()>(k, I16Values<V16Pairs>{{v.pairs, hd / kQK}, v.scales}, valid,
                         queries_from(q, h0, hd), hd, scale, st + h0);
  });
}

void attend_block_q8_0_i8_group_avx512vnni(const uint8_t* const* krows, const uint8_t* const* vrows,
                                           int valid, QueriesQ8 q, int n_q, int64_t hd, float scale,
                                           SoftmaxState* st, const BlockRows* next) {
  const RowsZeroPast<uint8_t> kz(krows, valid), vz(vrows, valid);
  const uint8_t* const* kr = kz.rows;
  const uint8_t* const* vr = vz.rows;
  // The next block's V rows while this one's K is transposed and scored (its K rows: during the
  // V sums, I16Values).
  if (next != nullptr && valid == kAttnBlock) {
    for (int p = 0; p < kAttnBlock; ++p) Prefetch{next->v, next->v_bytes}.lines_of_row(p, 0, 4);
  }
  alignas(64) uint8_t codes[256 / 4 * 64];
  alignas(64) float scales[256 / kQK * kAttnBlock], dv[256 / kQK * kAttnBlock];
  convert_k8_rows(kr, hd, K8Block{codes, scales});
  gather_scales(vr, hd, dv);
  in_sixes(n_q, [&](auto h, int h0) {
    attend_heads_i8<h()>(ConstK8Block{codes, scales},
                         I16Values<Q8_0RowPairs>{{vr}, dv, next_k(next, valid, h0)}, valid,
                         queries_from(q, h0, hd), hd, scale, st + h0);
  });
}

}  // namespace ponder
