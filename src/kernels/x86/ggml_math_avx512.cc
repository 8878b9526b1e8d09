// ggml_v_expf's lanes as expf_ggml (ggml_math.cc) computes one of them: the same fused steps in the
// same order, and _mm512_scalef_ps for the exact scaling by 2^n.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/x86/ggml_math_x86.h"

namespace ponder {
namespace {

#include "kernels/ggml_exp.h"
#include "kernels/x86/ggml_math_blocks.h"
#include "kernels/x86/vec_traits.h"

__m512 exp16(__m512 x) {
  __m512 n;
  const __m512 j = exp_ggml_poly<F32xN<16>>(x, &n);
  const __m512 scaled = _mm512_scalef_ps(j, n);
  // |n| > 192: 0 for n <= 0, inf above.
  const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
  const __mmask16 neg = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
  const __m512 limit =
      _mm512_mask_blend_ps(neg, _mm512_set1_ps(__builtin_inff()), _mm512_setzero_ps());
  return _mm512_mask_blend_ps(big, scaled, limit);
}

// The scalar reduce16 order of ggml_math.cc (GCC's _mm512_reduce_add_ps).
float reduce16(__m512 a) {
  const __m256 t8 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  const __m128 s = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));  // (t0 + t2), (t1 + t3)
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

}  // namespace

void swiglu_blocks_avx512(const float* gate, const float* up, int64_t n16, float* out) {
  swiglu_lanes<F32xN<16>>(gate, up, n16, out, exp16);
}

double softmax_exp_blocks_avx512(const float* x, float max, int64_t n16, float* y) {
  return softmax_exp_lanes<F32xN<16>>(x, max, n16, y, exp16,
                                      [](const float* p) { return reduce16(_mm512_loadu_ps(p)); });
}

}  // namespace ponder
