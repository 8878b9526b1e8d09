// Typed row functions, one pair per block format: what quantize_row / dequantize_row dispatch to,
// and what kernels/ call directly when the type is already known. n is the element count and must
// be a multiple of the block size (32 for Q4_0..Q8_0, 256 for the K formats).
// Depends on quant/blocks.h only.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace ponder {

// F16 / BF16 rows (raw uint16_t bits).
void fp16_row_to_fp32(const uint16_t* x, float* y, int64_t n);
void fp32_row_to_fp16(const float* x, uint16_t* y, int64_t n);
void bf16_row_to_fp32(const uint16_t* x, float* y, int64_t n);
void fp32_row_to_bf16(const float* x, uint16_t* y, int64_t n);

// Legacy formats: one scale (and min) per 32 elements (quant_legacy.cc).
void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n);
void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n);
void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n);
void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n);
void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n);
void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n);
void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n);
void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n);

// K formats: super-blocks of 256 with quantized sub-block scales (quant_k.cc, quant_k_low.cc).
void quantize_row_q2_K(const float* x, BlockQ2_K* y, int64_t n);
void quantize_row_q3_K(const float* x, BlockQ3_K* y, int64_t n);
void quantize_row_q4_K(const float* x, BlockQ4_K* y, int64_t n);
void quantize_row_q5_K(const float* x, BlockQ5_K* y, int64_t n);
void quantize_row_q6_K(const float* x, BlockQ6_K* y, int64_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n);
void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n);
void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n);
void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n);
void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n);
void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n);
void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block.
inline void get_scale_min_k4(int j, const uint8_t* scales, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((scales[j + 4] & 0xf) | ((scales[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

}  // namespace ponder
