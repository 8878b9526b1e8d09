// The legacy formats: one F16 scale (and for _1 an F16 min) per block of 32. Quantization is
// round-to-nearest from the block's extreme value, exactly as llama.cpp's reference quantizers
// (including their truncating casts), so that requantizing a model gives llama.cpp's bytes.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "quant/half.h"
#include "quant/quant_rows.h"

namespace ponder {

namespace {

// The element of largest magnitude, with its sign (the first one on ties).
float signed_abs_max(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (std::fabs(x[j]) > amax) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void min_max(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    *min = std::min(*min, x[j]);
    *max = std::max(*max, x[j]);
  }
}

// Packs 32 levels: element j in the low nibble of qs[j], element j + 16 in the high nibble; for
// 5-bit levels bit 4 of element j goes to bit j of the little-endian word qh.
void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0x0f) | ((L[j + kQK / 2] & 0x0f) << 4));
  }
}
void pack_high_bits(const uint8_t* L, uint8_t* qh) {
  uint32_t bits = 0;
  for (int j = 0; j < kQK; ++j) bits |= static_cast<uint32_t>((L[j] >> 4) & 1) << j;
  for (int b = 0; b < 4; ++b) qh[b] = static_cast<uint8_t>(bits >> (8 * b));
}
uint32_t load_high_bits(const uint8_t* qh) {
  return static_cast<uint32_t>(qh[0]) | static_cast<uint32_t>(qh[1]) << 8 |
         static_cast<uint32_t>(qh[2]) << 16 | static_cast<uint32_t>(qh[3]) << 24;
}

}  // namespace

void quantize_row_q4_0(const float* x, BlockQ4_0* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    // The extreme value maps to level 0 (-8 after the offset): max / -8 keeps its sign.
    const float d = signed_abs_max(x, kQK) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    uint8_t L[kQK];
    for (int j = 0; j < kQK; ++j) {
      L[j] = static_cast<uint8_t>(
          std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f))));
    }
    pack_nibbles(L, y[b].qs);
  }
}

void quantize_row_q4_1(const float* x, BlockQ4_1* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(min);
    uint8_t L[kQK];
    for (int j = 0; j < kQK; ++j) {
      L[j] = static_cast<uint8_t>(
          std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f))));
    }
    pack_nibbles(L, y[b].qs);
  }
}

void quantize_row_q5_0(const float* x, BlockQ5_0* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    const float d = signed_abs_max(x, kQK) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    uint8_t L[kQK];
    for (int j = 0; j < kQK; ++j) {
      L[j] = static_cast<uint8_t>(
          std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f))));
    }
    pack_nibbles(L, y[b].qs);
    pack_high_bits(L, y[b].qh);
  }
}

void quantize_row_q5_1(const float* x, BlockQ5_1* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float min, max;
    min_max(x, kQK, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    y[b].m = fp32_to_fp16(min);
    uint8_t L[kQK];
    for (int j = 0; j < kQK; ++j) {
      // (x - min) * id is in [0, 31] up to rounding, so the truncating cast needs no clamp; keep
      // the level in 5 bits regardless.
      L[j] = static_cast<uint8_t>(static_cast<uint8_t>((x[j] - min) * id + 0.5f) & 31);
    }
    pack_nibbles(L, y[b].qs);
    pack_high_bits(L, y[b].qh);
  }
}

void quantize_row_q8_0(const float* x, BlockQ8_0* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = fp32_to_fp16(d);
    for (int j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void dequantize_row_q4_0(const BlockQ4_0* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((x[b].qs[j] & 0x0f) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((x[b].qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_row_q4_1(const BlockQ4_1* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(x[b].qs[j] & 0x0f) * d + m;
      y[j + kQK / 2] = static_cast<float>(x[b].qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_row_q5_0(const BlockQ5_0* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    const uint32_t qh = load_high_bits(x[b].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[b].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kQK / 2)) & 1) << 4);
      y[j] = static_cast<float>(lo - 16) * d;
      y[j + kQK / 2] = static_cast<float>(hi - 16) * d;
    }
  }
}

void dequantize_row_q5_1(const BlockQ5_1* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    const float m = fp16_to_fp32(x[b].m);
    const uint32_t qh = load_high_bits(x[b].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (x[b].qs[j] & 0x0f) | static_cast<int>(((qh >> j) & 1) << 4);
      const int hi = (x[b].qs[j] >> 4) | static_cast<int>(((qh >> (j + kQK / 2)) & 1) << 4);
      y[j] = static_cast<float>(lo) * d + m;
      y[j + kQK / 2] = static_cast<float>(hi) * d + m;
    }
  }
}

void dequantize_row_q8_0(const BlockQ8_0* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK == 0);
  for (int64_t b = 0; b < n / kQK; ++b, y += kQK) {
    const float d = fp16_to_fp32(x[b].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(x[b].qs[j]) * d;
  }
}

}  // namespace ponder
