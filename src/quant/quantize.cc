// Dispatch by GgmlType to the typed row functions of quant_rows.h, and the 16-bit float rows.
#include "quant/quantize.h"

#include <cstring>

#include "base/check.h"
#include "quant/half.h"
#include "quant/quant_rows.h"

namespace ponder {

void fp16_row_to_fp32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp16_to_fp32(x[i]);
}
void fp32_row_to_fp16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}
void bf16_row_to_fp32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_fp32(x[i]);
}
void fp32_row_to_bf16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

bool can_quantize(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::Q8_0:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q8_K:
      return true;
    default:
      return false;
  }
}

bool can_dequantize(GgmlType type) { return can_quantize(type); }

void dequantize_row(GgmlType type, const void* src, float* dst, int64_t n) {
  PONDER_CHECK(can_dequantize(type));
  PONDER_CHECK(n % ggml_type_info(type).block_size == 0);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      return fp16_row_to_fp32(static_cast<const uint16_t*>(src), dst, n);
    case GgmlType::BF16:
      return bf16_row_to_fp32(static_cast<const uint16_t*>(src), dst, n);
    case GgmlType::Q4_0:
      return dequantize_row_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
    case GgmlType::Q4_1:
      return dequantize_row_q4_1(static_cast<const BlockQ4_1*>(src), dst, n);
    case GgmlType::Q5_0:
      return dequantize_row_q5_0(static_cast<const BlockQ5_0*>(src), dst, n);
    case GgmlType::Q5_1:
      return dequantize_row_q5_1(static_cast<const BlockQ5_1*>(src), dst, n);
    case GgmlType::Q8_0:
      return dequantize_row_q8_0(static_cast<const BlockQ8_0*>(src), dst, n);
    case GgmlType::Q2_K:
      return dequantize_row_q2_K(static_cast<const BlockQ2_K*>(src), dst, n);
    case GgmlType::Q3_K:
      return dequantize_row_q3_K(static_cast<const BlockQ3_K*>(src), dst, n);
    case GgmlType::Q4_K:
      return dequantize_row_q4_K(static_cast<const BlockQ4_K*>(src), dst, n);
    case GgmlType::Q5_K:
      return dequantize_row_q5_K(static_cast<const BlockQ5_K*>(src), dst, n);
    case GgmlType::Q6_K:
      return dequantize_row_q6_K(static_cast<const BlockQ6_K*>(src), dst, n);
    case GgmlType::Q8_K:
      return dequantize_row_q8_K(static_cast<const BlockQ8_K*>(src), dst, n);
    default:
      PONDER_CHECK(false);
  }
}

void quantize_row(GgmlType type, const float* src, void* dst, int64_t n) {
  PONDER_CHECK(can_quantize(type));
  PONDER_CHECK(n % ggml_type_info(type).block_size == 0);
  switch (type) {
    case GgmlType::F32:
      std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16:
      return fp32_row_to_fp16(src, static_cast<uint16_t*>(dst), n);
    case GgmlType::BF16:
      return fp32_row_to_bf16(src, static_cast<uint16_t*>(dst), n);
    case GgmlType::Q4_0:
      return quantize_row_q4_0(src, static_cast<BlockQ4_0*>(dst), n);
    case GgmlType::Q4_1:
      return quantize_row_q4_1(src, static_cast<BlockQ4_1*>(dst), n);
    case GgmlType::Q5_0:
      return quantize_row_q5_0(src, static_cast<BlockQ5_0*>(dst), n);
    case GgmlType::Q5_1:
      return quantize_row_q5_1(src, static_cast<BlockQ5_1*>(dst), n);
    case GgmlType::Q8_0:
      return quantize_row_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
    case GgmlType::Q2_K:
      return quantize_row_q2_K(src, static_cast<BlockQ2_K*>(dst), n);
    case GgmlType::Q3_K:
      return quantize_row_q3_K(src, static_cast<BlockQ3_K*>(dst), n);
    case GgmlType::Q4_K:
      return quantize_row_q4_K(src, static_cast<BlockQ4_K*>(dst), n);
    case GgmlType::Q5_K:
      return quantize_row_q5_K(src, static_cast<BlockQ5_K*>(dst), n);
    case GgmlType::Q6_K:
      return quantize_row_q6_K(src, static_cast<BlockQ6_K*>(dst), n);
    case GgmlType::Q8_K:
      return quantize_row_q8_K(src, static_cast<BlockQ8_K*>(dst), n);
    default:
      PONDER_CHECK(false);
  }
}

}  // namespace ponder
