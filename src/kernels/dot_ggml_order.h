// Scalar row dot products of a weight row (any storage type) with an activation row that was first
// rounded to the weight type's companion ("vec-dot") type, as llama.cpp's CPU backend does it.
//
// Why the exact float order matters: the golden logits (shared/golden) come from llama.cpp's x86
// CPU backend (ggml/src/ggml-cpu/arch/x86/quants.c; on the AVX-512 golden machine the AVX2 branches
// of those functions are what is compiled, there are no AVX-512 variants). The small test model is
// chaotic: a 1-ulp difference in one matmul output flips int8 roundings of the next activations
// and moves the logits measurably. So each function below reproduces the float operations of the
// llama.cpp kernel that produced the goldens in the same order (8 float accumulator lanes, fused
// multiply-adds, the same horizontal sum), while the integer parts are exact and computed plainly.
// Some deviate from current llama.cpp's vec_dot, as measured on the goldens: Q4_0 follows the
// repacked (CPU_REPACK q4_0_8x8) gemm/gemv, Q6_K the older per-element offset of its AVX2 kernel.
// One order per type whatever the batch size (batch invariance, DESIGN.md): llama.cpp switches
// F32 / F16 products of 2+ rows to llamafile's tinyBLAS order; we do not, at a cost of <= 0.0007
// mean dlogp on the F32 / F16 goldens (threshold 0.003). BF16 is the other way round: tinyBLAS's
// order for every batch size, since it reproduces the golden prompt rows bit for bit.
// Depends on gguf/ggml_type.h and quant/blocks.h.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace ponder {

// The type activations are rounded to before they are dotted with weights of type w:
// F32 -> F32, F16 -> F16, BF16 -> BF16, Q4_0/Q5_0/Q8_0 -> Q8_0, Q4_1/Q5_1 -> Q8_1, K types -> Q8_K.
GgmlType dot_activation_type(GgmlType w);

// Rounds n activations to `at` (a dot_activation_type) into dst (ggml_row_bytes(at, n) bytes),
// bit-identical to llama.cpp's x86 quantize_row_q8_0 / q8_1 (AVX2) / q8_K (reference) and the
// F16C / bf16 conversions.
void quantize_activation_row(GgmlType at, const float* x, void* dst, int64_t n);

// A row dot: w_row holds n elements of the weight type, x_row n elements of its activation type.
using RowDot = float(const void* w_row, const void* x_row, int64_t n);
using RowDotFn = RowDot*;

// The dot for weights of type w, or nullptr if there is none. n_rows is unused: every batch size
// gets the same order, so a row's result never depends on what it is batched with.
RowDotFn row_dot_function(GgmlType w, int64_t n_rows = 1);

// ggml_vec_dot_f16's float order on AVX-512 (llama.cpp's F16 x F16 dot, also the one of its
// non-flash attention: K.q and V.softmax with the cache and the operand rounded to F16).
float dot_f16_ggml(const uint16_t* x, const uint16_t* y, int64_t n);

// out[i] = dot_f16_ggml(column i of the rows, probs, n_pad) for i < dim, bit for bit, where
// row p is rows[p][0..dim) for p < n and zero beyond (n_pad: n rounded up to 64). Walks the rows
// in order with one accumulator per (lane, column), so the inner loop runs along contiguous rows:
// attention's probability-weighted sum of V without gathering V's columns.
// scratch: [64 * dim] floats.
void weighted_rows_f16_ggml(const uint16_t* const* rows, const uint16_t* probs, int64_t n,
                            int64_t dim, float* out, float* scratch);

// One 32-bit lane of vdpbf16ps (AVX512_BF16) in scalar code, as Intel defines it and as checked
// against the instruction (kernels_test Bf16Lane): a_pair / b_pair hold two bf16 (element 2j in the
// low half, 2j + 1 in the high half); acc = fma(a[2j+1], b[2j+1], acc), then acc = fma(a[2j],
// b[2j], acc), each rounded to nearest even, with subnormal inputs (bf16 and acc) read as zero and
// subnormal results flushed to zero (signed), whatever MXCSR says.
float vdpbf16ps_lane(float acc, uint32_t a_pair, uint32_t b_pair);

// The reference row dots (dot_ggml_order.cc), one per weight type.
RowDot dot_f32;  // ggml_vec_dot_f32
RowDot dot_f16;
// llamafile tinyBLAS's AVX512BF16 order (what llama.cpp runs on batches of 2+ rows): one 16-lane
// vdpbf16ps accumulator per output over runs of 32, reduced in float; in scalar code, for any
// batch size (dot_ggml_order.cc).
RowDot dot_bf16;
RowDot dot_q4_0, dot_q4_1, dot_q5_0, dot_q5_1, dot_q8_0;
RowDot dot_q2_K, dot_q3_K, dot_q4_K, dot_q5_K, dot_q6_K;

}  // namespace ponder
