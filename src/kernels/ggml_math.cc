#include "kernels/ggml_math.h"

#include <cmath>

#include "cpu/cpu_features.h"
#if PONDER_X86_KERNELS
#include "kernels/x86/ggml_math_x86.h"
#endif

namespace ponder {
namespace {

#include "kernels/ggml_exp.h"

// GCC's _mm512_reduce_add_ps order (as in dot_ggml_order.cc).
float reduce16(const float a[16]) {
  float t8[8], t4[4];
  for (int l = 0; l < 8; ++l) t8[l] = a[l + 8] + a[l];
  for (int l = 0; l < 4; ++l) t4[l] = t8[l + 4] + t8[l];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

}  // namespace

float expf_ggml(float x) {
  // ggml_exp.h's steps; _mm512_scalef_ps is an exact scaling by 2^n (rounded only if the result is
  // subnormal, as ldexp does).
  float n;
  const float j = exp_ggml_poly<ScalarOps>(x, &n);
  if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
  return std::ldexp(j, static_cast<int>(n));
}

float silu_ggml(float x) { return x / (1.0f + expf_ggml(0.0f - x)); }

void swiglu_ggml(const float* gate, const float* up, int64_t n, float* out) {
  const int64_t n16 = n & ~int64_t{15};
#if PONDER_X86_KERNELS  // the SIMD blocks are bitwise the scalar ones
  if (active_isa() == Isa::kAvx512) {
    swiglu_blocks_avx512(gate, up, n16, out);
  } else if (isa_runs_avx2(active_isa())) {
    swiglu_blocks_avx2(gate, up, n16, out);
  } else
#endif
  {
    for (int64_t i = 0; i < n16; ++i) out[i] = silu_ggml(gate[i]) * up[i];
  }
  for (int64_t i = n16; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

double softmax_exp_sum_ggml(const float* x, float max, int64_t n, float* y) {
  double sum = 0;
  int64_t i = 0;
#if PONDER_X86_KERNELS
  if (isa_runs_avx2(active_isa())) {
    i = n & ~int64_t{15};
    sum = active_isa() == Isa::kAvx512 ? softmax_exp_blocks_avx512(x, max, i, y)
                                       : softmax_exp_blocks_avx2(x, max, i, y);
  }
#endif
  for (; i + 16 <= n; i += 16) {
    for (int l = 0; l < 16; ++l) y[i + l] = expf_ggml(x[i + l] - max);
    sum += static_cast<double>(reduce16(y + i));
  }
  for (; i < n; ++i) {
    y[i] = std::exp(x[i] - max);
    sum += static_cast<double>(y[i]);
  }
  return sum;
}

}  // namespace ponder
