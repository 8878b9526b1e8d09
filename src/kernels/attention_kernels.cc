#include "kernels/attention_kernels.h"

#include <cmath>

#include "cpu/cpu_features.h"
#include "kernels/dot_ggml_order.h"
#include "quant/half.h"

namespace ponder {

#if defined(PONDER_X86_KERNELS)
float dot_f16_ggml_avx512(const uint16_t* x, const uint16_t* y, int64_t n);
void weighted_rows_f16_ggml_avx512(const uint16_t* const* rows, const uint16_t* probs, int64_t n,
                                   int64_t dim, float* out, float* scratch);
void accumulate_rows_f16_avx512(const uint16_t* const* rows, const uint16_t* probs, int64_t p_begin,
                                int64_t p_end, int64_t dim, float* acc);
void reduce_lanes_f16_avx512(const float* acc, int64_t dim, float* out);
void scaled_to_f16_avx512(const float* x, float scale, uint16_t* y, int64_t n);
void dot_f16_heads_avx512(const uint16_t* x, const uint16_t* y, int n_y, int64_t n, float* out);
#endif

namespace {
void dot_f16_heads(const uint16_t* x, const uint16_t* y, int n_y, int64_t n, float* out) {
  for (int h = 0; h < n_y; ++h) out[h] = dot_f16_ggml(x, y + h * n, n);
}

void accumulate_rows_f16(const uint16_t* const* rows, const uint16_t* probs, int64_t p_begin,
                         int64_t p_end, int64_t dim, float* acc) {
  for (int64_t p = p_begin; p < p_end; ++p) {
    const float w = fp16_to_fp32(probs[p]);
    float* a = acc + (p % 64) * dim;
    for (int64_t i = 0; i < dim; ++i) a[i] = std::fma(fp16_to_fp32(rows[p][i]), w, a[i]);
  }
}

// Column i: lanes[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]), then the 16 lanes
// halved twice and the last four summed as (t[0] + t[2]) + (t[1] + t[3]).
void reduce_lanes_f16(const float* acc, int64_t dim, float* out) {
  for (int64_t i = 0; i < dim; ++i) {
    float lanes[16], t8[8], t4[4];
    for (int l = 0; l < 16; ++l) {
      lanes[l] = (acc[l * dim + i] + acc[(32 + l) * dim + i]) +
                 (acc[(16 + l) * dim + i] + acc[(48 + l) * dim + i]);
    }
    for (int l = 0; l < 8; ++l) t8[l] = lanes[l + 8] + lanes[l];
    for (int l = 0; l < 4; ++l) t4[l] = t8[l + 4] + t8[l];
    out[i] = (t4[0] + t4[2]) + (t4[1] + t4[3]);
  }
}

void scaled_to_f16(const float* x, float scale, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i] * scale);
}

}  // namespace

const AttentionKernels& attention_kernels_scalar() {
  static const AttentionKernels k{dot_f16_ggml,        dot_f16_heads,    weighted_rows_f16_ggml,
                                  accumulate_rows_f16, reduce_lanes_f16, scaled_to_f16};
  return k;
}

const AttentionKernels* attention_kernels_avx512() {
#if defined(PONDER_X86_KERNELS)
  static const AttentionKernels k{dot_f16_ggml_avx512,           dot_f16_heads_avx512,
                                  weighted_rows_f16_ggml_avx512, accumulate_rows_f16_avx512,
                                  reduce_lanes_f16_avx512,       scaled_to_f16_avx512};
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
