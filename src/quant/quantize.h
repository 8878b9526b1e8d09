// Quantize and dequantize rows of any tensor type Ponder stores, by GgmlType. This is the scalar
// reference: bit-compatible with the GGUF block layouts (blocks.h), and for quantization the same
// rounding and scale searches as llama.cpp's reference quantizers, so files we write read the same
// everywhere and are as accurate as theirs. Kernels (SIMD, fused dot products) live in kernels/
// and are tested against these.
// Depends on base and gguf/ggml_type.h only.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace ponder {

// n must be a multiple of the type's block size; dst holds ggml_row_bytes(type, n) bytes.
void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType type, const float* src, void* dst, int64_t n);

// True for every type above (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, Q8_K).
bool can_quantize(GgmlType type);
bool can_dequantize(GgmlType type);

}  // namespace ponder
