// AVX-512 and AVX2 versions of the whole 16-element blocks of ggml_math.h's functions, bit for bit
// the same (one lane of each is expf_ggml / silu_ggml). Compiled with their ISA's flags; call only
// where active_isa() has that ISA.
// Depends on nothing.
#pragma once

#include <cstdint>

namespace ponder {

// out[i] = silu_ggml(gate[i]) * up[i] for i < n16 (a multiple of 16).
void swiglu_blocks_avx512(const float* gate, const float* up, int64_t n16, float* out);

// y[i] = expf_ggml(x[i] - max) for i < n16 (a multiple of 16); returns the sum of the blocks'
// float sums (reduce-add order) in double, as softmax_exp_sum_ggml does.
double softmax_exp_blocks_avx512(const float* x, float max, int64_t n16, float* y);

// The same with AVX2 + FMA (x86/ggml_math_avx2.cc).
void swiglu_blocks_avx2(const float* gate, const float* up, int64_t n16, float* out);
double softmax_exp_blocks_avx2(const float* x, float max, int64_t n16, float* y);

}  // namespace ponder
