// The f16 dot products of attention (K.q and the probability-weighted sums of V rows), dispatched
// at run time to an AVX-512 version where the CPU has it. Every version computes the same bits as
// the scalar reference in dot_ggml_order.h (llama.cpp's order; see docs/numerics.md), so the ISA
// never changes a logit.
// Depends on cpu (ISA choice) and kernels/dot_ggml_order.h.
#pragma once

#include <cstdint>

namespace ponder {

struct AttentionKernels {
  // dot_f16_ggml
  float (*dot_f16)(const uint16_t* x, const uint16_t* y, int64_t n);
  // out[h] = dot_f16_ggml(x, y + h * n, n) for h < n_y: one K row against the query heads
  // that share it (GQA), the row read once.
  void (*dot_f16_heads)(const uint16_t* x, const uint16_t* y, int n_y, int64_t n, float* out);
  // weighted_rows_f16_ggml
  void (*weighted_rows_f16)(const uint16_t* const* rows, const uint16_t* probs, int64_t n,
                            int64_t dim, float* out, float* scratch);
  // weighted_rows_f16_ggml in two steps, so several probability vectors can share each V row
  // while it is in cache: accumulate_rows_f16 adds positions [p_begin, p_end) into the 64 lane
  // accumulators acc[64][dim] (lane p % 64: acc[l * dim + i] = fma(rows[p][i], probs[p],
  // acc[l * dim + i])), and reduce_lanes_f16 folds the lanes into out[dim] as the dot does. Zeroed
  // acc, then accumulate over [0, n) in any split of increasing ranges, then reduce: bitwise
  // weighted_rows_f16_ggml(rows, probs, n, dim, out).
  void (*accumulate_rows_f16)(const uint16_t* const* rows, const uint16_t* probs, int64_t p_begin,
                              int64_t p_end, int64_t dim, float* acc);
  void (*reduce_lanes_f16)(const float* acc, int64_t dim, float* out);
  // y[i] = f16(x[i] * scale), rounded to nearest even (fp32_to_fp16 of quant/half.h)
  void (*scaled_to_f16)(const float* x, float scale, uint16_t* y, int64_t n);
};

// The kernels for active_isa() (PONDER_ISA may force scalar).
const AttentionKernels& attention_kernels();
// The scalar reference and, where compiled and supported, the AVX-512 version (nullptr if not).
const AttentionKernels& attention_kernels_scalar();
const AttentionKernels* attention_kernels_avx512();

}  // namespace ponder
