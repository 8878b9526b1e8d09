// ggml_v_expf's lanes as expf_ggml (ggml_math.cc) computes one of them, 8 at a time with AVX2 +
// FMA: the same fused steps in the same order. AVX2 has no vscalefps: the exact scaling by 2^n is
// two multiplications by powers of two, 2^(n/2) then 2^(n - n/2), both normal for |n| <= 192, the
// first exact (j * 2^(n/2) stays normal), so the result is rounded once, as ldexp and vscalefps
// round it. Bitwise the scalar blocks (kernels_test).
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/x86/ggml_math_x86.h"

namespace ponder {
namespace {

#include "kernels/ggml_exp.h"
#include "kernels/x86/ggml_math_blocks.h"
#include "kernels/x86/vec_traits.h"

// 2^e for integer-valued floats e in [-126, 127], built in the exponent field.
__m256 pow2(__m256 e) {
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(e), _mm256_set1_epi32(127)), 23);
  return _mm256_castsi256_ps(bits);
}

__m256 exp8(__m256 x) {
  __m256 n;
  const __m256 j = exp_ggml_poly<F32xN<8>>(x, &n);
  // |n| > 192: 0 for n <= 0, inf above (n is then clamped so the scaling below stays defined).
  const __m256 limit_n = _mm256_set1_ps(192.0f);
  const __m256 big = _mm256_cmp_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), n), limit_n, _CMP_GT_OQ);
  const __m256 nc =
      _mm256_min_ps(_mm256_max_ps(n, _mm256_sub_ps(_mm256_setzero_ps(), limit_n)), limit_n);
  const __m256 n1 = _mm256_round_ps(_mm256_mul_ps(nc, _mm256_set1_ps(0.5f)),
                                    _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  const __m256 scaled = _mm256_mul_ps(_mm256_mul_ps(j, pow2(n1)), pow2(_mm256_sub_ps(nc, n1)));
  const __m256 neg = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
  const __m256 limit = _mm256_blendv_ps(_mm256_set1_ps(__builtin_inff()), _mm256_setzero_ps(), neg);
  return _mm256_blendv_ps(scaled, limit, big);
}

// The reduce16 order of ggml_math.cc: lanes l + 8 and l, then halves, then (0 + 2) + (1 + 3).
float reduce16(const float* p) {
  const __m256 t8 = _mm256_add_ps(_mm256_loadu_ps(p + 8), _mm256_loadu_ps(p));
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  const __m128 s = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

}  // namespace

void swiglu_blocks_avx2(const float* gate, const float* up, int64_t n16, float* out) {
  swiglu_lanes<F32xN<8>>(gate, up, n16, out, exp8);
}

double softmax_exp_blocks_avx2(const float* x, float max, int64_t n16, float* y) {
  return softmax_exp_lanes<F32xN<8>>(x, max, n16, y, exp8, reduce16);
}

}  // namespace ponder
