// Scalar reproductions of the float math llama.cpp's CPU backend applies between the matmuls, bit
// for bit as compiled for AVX-512 (ggml-cpu/vec.h, vec.cpp): its exp approximation (ggml_v_expf),
// SiLU / SwiGLU, and the exp-and-sum step of softmax. Offered to the forward pass for the same
// reason as dot_ggml_order.h: the goldens' chaotic tiny model needs the same roundings.
// Depends on nothing but the standard library.
#pragma once

#include <cstdint>

namespace ponder {

// One lane of ggml_v_expf (AVX-512): a degree-5 polynomial after range reduction, ~1.5 ulp from
// the true exp; 0 below and inf above |n| > 192.
float expf_ggml(float x);

// ggml_v_silu: x / (1 + expf_ggml(0 - x)).
float silu_ggml(float x);

// ggml_vec_swiglu_f32: out[i] = silu(gate[i]) * up[i], 16-wide blocks with silu_ggml, the last
// n % 16 with x / (1 + libm expf(-x)).
void swiglu_ggml(const float* gate, const float* up, int64_t n, float* out);

// ggml_vec_soft_max_f32: y[i] = exp(x[i] - max) (expf_ggml in 16-wide blocks, libm expf for the
// last n % 16) and returns their sum in double, each block of 16 first summed in float as
// _mm512_reduce_add_ps does. The caller scales y by float(1.0 / sum), as
// ggml_compute_forward_soft_max.
double softmax_exp_sum_ggml(const float* x, float max, int64_t n, float* y);

}  // namespace ponder
