// AVX2 version of the block order's kernels (kernels/block_attention.h), bit for bit the scalar
// reference and the AVX-512 version: each 16-lane accumulator of the order is a pair of 8-lane
// registers (lanes 0-7, lanes 8-15), whose sum is the tree's first step; a transposing tree of
// shuffles and adds does the rest for 8 positions at once.
// It keeps its own file rather than sharing the AVX-512 one's code through x86/vec_traits.h:
// the 16 lanes of each accumulator live in two registers here, so the score tree, the value
// loop and the row conversions are laid out differently, not the same loops at another width
// (what is the same, ggml's exp steps, is shared: kernels/ggml_exp.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/block_attention.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

#include "kernels/ggml_exp.h"
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
// Within each 128-bit half: [a0 + a2, a1 + a3, b0 + b2, b1 + b3].
inline __m256 fold2(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(1, 0, 1, 0)),
                       _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 2, 3, 2)));
}
// Within each 128-bit half: [a0 + a1, a2 + a3, b0 + b1, b2 + b3].
inline __m256 fold1(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1)));
}

// r8[p] (lanes j: acc_j + acc_{j+8}) for the 4 rows k[p0 .. p0 + 3].
inline void first_fold4(const float* k, const float* q, int64_t hdp, int p0, __m256* r8) {
  __m256 lo[4], hi[4];
  for (int p = 0; p < 4; ++p) lo[p] = hi[p] = _mm256_setzero_ps();
  for (int64_t d = 0; d < hdp; d += 16) {
    const __m256 qlo = _mm256_loadu_ps(q + d), qhi = _mm256_loadu_ps(q + d + 8);
    for (int p = 0; p < 4; ++p) {
      const float* kp = k + (p0 + p) * hdp + d;
      lo[p] = _mm256_fmadd_ps(_mm256_loadu_ps(kp), qlo, lo[p]);
      hi[p] = _mm256_fmadd_ps(_mm256_loadu_ps(kp + 8), qhi, hi[p]);
    }
  }
  for (int p = 0; p < 4; ++p) r8[p] = _mm256_add_ps(lo[p], hi[p]);
}

// Lane p = dot(k[p0 + p], q) for p < 8, in tree16's order.
inline __m256 scores8(const float* k, const float* q, int64_t hdp, int p0) {
  __m256 r[8];
  first_fold4(k, q, hdp, p0, r);
  first_fold4(k, q, hdp, p0 + 4, r + 4);
  // Positions a..h end in lanes [a c e g | b d f h]: pair (0, 4), (1, 5), (2, 6), (3, 7).
  const __m256 ab = fold4(r[0], r[4]), cd = fold4(r[1], r[5]);
  const __m256 ef = fold4(r[2], r[6]), gh = fold4(r[3], r[7]);
  return fold1(fold2(ab, cd), fold2(ef, gh));
}

template <int C>
inline void add_values(const float* v, const float* e, int valid, int64_t hdp, float corr,
                       float* acc, int64_t c0) {
  __m256 a[C];
  for (int c = 0; c < C; ++c) a[c] = _mm256_loadu_ps(acc + c0 + 8 * c);
  if (corr != 1.0f) {
    const __m256 cv = _mm256_set1_ps(corr);
    for (int c = 0; c < C; ++c) a[c] = _mm256_mul_ps(a[c], cv);
  }
  for (int p = 0; p < valid; ++p) {
    const __m256 w = _mm256_set1_ps(e[p]);
    const float* vp = v + p * hdp + c0;
    for (int c = 0; c < C; ++c) a[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vp + 8 * c), a[c]);
  }
  for (int c = 0; c < C; ++c) _mm256_storeu_ps(acc + c0 + 8 * c, a[c]);
}

inline float hmax8(__m256 a) {
  const __m128 t4 = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 t2 = _mm_max_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_max_ss(t2, _mm_movehdup_ps(t2)));
}

}  // namespace

void convert_block_avx2(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp, float* out) {
  for (int p = 0; p < kAttnBlock; ++p) {
    float* o = out + p * hdp;
    int64_t i = 0;
    if (p < n) {
      for (; i + 8 <= hd; i += 8) {
        _mm256_storeu_ps(
            o + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[p] + i))));
      }
      for (; i < hd; ++i) o[i] = _cvtsh_ss(rows[p][i]);
    }
    for (; i < hdp; ++i) o[i] = 0.0f;
  }
}

void convert_block_q8_0_avx2(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp,
                             float* out) {
  for (int p = 0; p < kAttnBlock; ++p) {
    float* o = out + p * hdp;
    if (p >= n) {
      for (int64_t i = 0; i < hdp; i += 8) _mm256_storeu_ps(o + i, _mm256_setzero_ps());
      continue;
    }
    const auto* blk = reinterpret_cast<const BlockQ8_0*>(rows[p]);
    for (int64_t b = 0; b < hd / kQK; ++b) {
      const __m256 d = _mm256_set1_ps(_cvtsh_ss(blk[b].d));
      for (int j = 0; j < kQK; j += 8) {
        const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk[b].qs + j));
        _mm256_storeu_ps(o + b * kQK + j,
                         _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
      }
    }
  }
}

void fold_avx2(float* o, const float* acc, float a, float b, int64_t hdp) {
  const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
  for (int64_t i = 0; i < hdp; i += 8) {
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_loadu_ps(acc + i), bv,
                                            _mm256_mul_ps(_mm256_loadu_ps(o + i), av)));
  }
}

void attend_block_avx2(const float* k, const float* v, const float* q, int valid, int64_t hdp,
                       float scale, SoftmaxState& st) {
  const __m256 sc = _mm256_set1_ps(scale);
  const __m256 s_lo = _mm256_mul_ps(scores8(k, q, hdp, 0), sc);
  const __m256 s_hi = valid > 8 ? _mm256_mul_ps(scores8(k, q, hdp, 8), sc) : _mm256_setzero_ps();
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
  alignas(32) float ev[kAttnBlock];
  _mm256_store_ps(ev, e_lo);
  _mm256_store_ps(ev + 8, e_hi);
  int64_t c0 = 0;
  for (; c0 + 64 <= hdp; c0 += 64) add_values<8>(v, ev, valid, hdp, corr, st.acc, c0);
  for (; c0 < hdp; c0 += 8) add_values<1>(v, ev, valid, hdp, corr, st.acc, c0);
}

}  // namespace ponder
