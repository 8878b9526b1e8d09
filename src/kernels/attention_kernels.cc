#include "kernels/attention_kernels.h"

#include "cpu/cpu_features.h"
#include "kernels/dot_ggml_order.h"
#include "quant/half.h"

namespace ponder {

#if defined(PONDER_X86_KERNELS)
float dot_f16_ggml_avx512(const uint16_t* x, const uint16_t* y, int64_t n);
void weighted_rows_f16_ggml_avx512(const uint16_t* const* rows, const uint16_t* probs, int64_t n,
                                   int64_t dim, float* out, float* scratch);
void scaled_to_f16_avx512(const float* x, float scale, uint16_t* y, int64_t n);
void dot_f16_heads_avx512(const uint16_t* x, const uint16_t* y, int n_y, int64_t n, float* out);
#endif

namespace {
void dot_f16_heads(const uint16_t* x, const uint16_t* y, int n_y, int64_t n, float* out) {
  for (int h = 0; h < n_y; ++h) out[h] = dot_f16_ggml(x, y + h * n, n);
}

void scaled_to_f16(const float* x, float scale, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i] * scale);
}
}  // namespace

const AttentionKernels& attention_kernels_scalar() {
  static const AttentionKernels k{dot_f16_ggml, dot_f16_heads, weighted_rows_f16_ggml,
                                  scaled_to_f16};
  return k;
}

const AttentionKernels* attention_kernels_avx512() {
#if defined(PONDER_X86_KERNELS)
  static const AttentionKernels k{dot_f16_ggml_avx512, dot_f16_heads_avx512,
                                  weighted_rows_f16_ggml_avx512,
                                  scaled_to_f16_avx512};
  if (isa_supported(Isa::kAvx512)) return &k;
#endif
  return nullptr;
}

const AttentionKernels& attention_kernels() {
  static const AttentionKernels* chosen = [] {
    if (active_isa() == Isa::kAvx512 && attention_kernels_avx512() != nullptr) {
      return attention_kernels_avx512();
    }
    return &attention_kernels_scalar();
  }();
  return *chosen;
}

}  // namespace ponder
