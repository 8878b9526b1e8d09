// Q2_K and Q3_K: super-blocks of 256 in 16 sub-blocks of 16, with 4-bit (Q2_K: scale and min) or
// 6-bit (Q3_K: signed scale) sub-block scales under one F16 super-block scale. As in quant_k.cc:
// search each sub-block's scale, quantize the scales, then re-round the values against the
// scales as stored.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "quant/half.h"
#include "quant/quant_rows.h"
#include "quant/scale_search.h"

namespace ponder {

using quant_internal::round_nearest;

namespace {

// 2-bit levels: element 128 h + 32 k + l is bits 2k..2k+1 of qs[32 h + l].
void pack_2bit(const uint8_t* L, uint8_t* qs) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      qs[32 * h + l] =
          static_cast<uint8_t>(Lh[l] | (Lh[l + 32] << 2) | (Lh[l + 64] << 4) | (Lh[l + 96] << 6));
    }
  }
}

int unpack_2bit(const uint8_t* qs, int i) {
  const int h = i / 128, k = (i % 128) / 32, l = i % 32;
  return (qs[32 * h + l] >> (2 * k)) & 3;
}

// The signed 6-bit scale of sub-block s (0..15) of a Q3_K block.
int q3_k_scale(const uint8_t* scales, int s) {
  const int low = s < 8 ? scales[s] & 0xf : scales[s - 8] >> 4;
  const int high = (scales[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace

void quantize_row_q2_K(const float* x, BlockQ2_K* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  constexpr float kLevels = 15.0f;  // 4-bit sub-block scales and mins
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    float sub_scale[16];
    float sub_min[16];
    float max_scale = 0.0f;
    float max_min = 0.0f;
    for (int s = 0; s < 16; ++s) {
      float weights[16];
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * s + l]);
      sub_scale[s] = quant_internal::search_affine_scale(16, 3, x + 16 * s, weights, L + 16 * s,
                                                         &sub_min[s], -0.5f, 0.1f, 15, true);
      max_scale = std::max(max_scale, sub_scale[s]);
      max_min = std::max(max_min, sub_min[s]);
    }

    if (max_scale > 0.0f) {
      const float iscale = kLevels / max_scale;
      for (int s = 0; s < 16; ++s)
        y[b].scales[s] = static_cast<uint8_t>(round_nearest(iscale * sub_scale[s]));
      y[b].d = fp32_to_fp16(max_scale / kLevels);
    } else {
      std::memset(y[b].scales, 0, sizeof(y[b].scales));
      y[b].d = fp32_to_fp16(0.0f);
    }
    if (max_min > 0.0f) {
      const float iscale = kLevels / max_min;
      for (int s = 0; s < 16; ++s) {
        y[b].scales[s] |= static_cast<uint8_t>(round_nearest(iscale * sub_min[s]) << 4);
      }
      y[b].dmin = fp32_to_fp16(max_min / kLevels);
    } else {
      y[b].dmin = fp32_to_fp16(0.0f);
    }

    const float d_all = fp16_to_fp32(y[b].d);
    const float dmin_all = fp16_to_fp32(y[b].dmin);
    for (int s = 0; s < 16; ++s) {
      const float d = d_all * (y[b].scales[s] & 0xf);
      if (d == 0.0f) continue;
      const float dm = dmin_all * (y[b].scales[s] >> 4);
      for (int l = 0; l < 16; ++l) {
        L[16 * s + l] =
            static_cast<uint8_t>(std::clamp(round_nearest((x[16 * s + l] + dm) / d), 0, 3));
      }
    }
    pack_2bit(L, y[b].qs);
  }
}

void quantize_row_q3_K(const float* x, BlockQ3_K* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float sub_scale[16];
    float max_scale = 0.0f;  // the scale of largest magnitude, with its sign
    float amax = 0.0f;
    for (int s = 0; s < 16; ++s) {
      sub_scale[s] = quant_internal::search_symmetric_scale_refined(16, 4, x + 16 * s, L + 16 * s);
      if (std::fabs(sub_scale[s]) > amax) {
        amax = std::fabs(sub_scale[s]);
        max_scale = sub_scale[s];
      }
    }

    std::memset(y[b].scales, 0, sizeof(y[b].scales));
    if (max_scale != 0.0f) {
      // Signed 6-bit sub-block scales; the largest maps onto -32.
      const float iscale = -32.0f / max_scale;
      for (int s = 0; s < 16; ++s) {
        const int8_t q = static_cast<int8_t>(round_nearest(iscale * sub_scale[s]));
        const int l = std::clamp<int>(q, -32, 31) + 32;
        if (s < 8) {
          y[b].scales[s] = static_cast<uint8_t>(l & 0xf);
        } else {
          y[b].scales[s - 8] |= static_cast<uint8_t>((l & 0xf) << 4);
        }
        y[b].scales[8 + s % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (s / 4)));
      }
      y[b].d = fp32_to_fp16(1.0f / iscale);
    } else {
      y[b].d = fp32_to_fp16(0.0f);
    }

    const float d_all = fp16_to_fp32(y[b].d);
    for (int s = 0; s < 16; ++s) {
      const float d = d_all * q3_k_scale(y[b].scales, s);
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * s + l] =
            static_cast<int8_t>(std::clamp(round_nearest(x[16 * s + l] / d), -4, 3) + 4);
      }
    }

    // Bit 2 of element 32 k + l goes to bit k of hmask[l]; the low 2 bits are packed as in Q2_K.
    std::memset(y[b].hmask, 0, sizeof(y[b].hmask));
    uint8_t low[kQK_K];
    for (int i = 0; i < kQK_K; ++i) {
      if (L[i] > 3) y[b].hmask[i % 32] |= static_cast<uint8_t>(1 << (i / 32));
      low[i] = static_cast<uint8_t>(L[i] & 3);
    }
    pack_2bit(low, y[b].qs);
  }
}

void dequantize_row_q2_K(const BlockQ2_K* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int s = 0; s < 16; ++s) {
      const uint8_t sc = x[b].scales[s];
      const float dl = d * (sc & 0xf);
      const float ml = dmin * (sc >> 4);
      for (int l = 0; l < 16; ++l) {
        const int i = 16 * s + l;
        y[i] = dl * unpack_2bit(x[b].qs, i) - ml;
      }
    }
  }
}

void dequantize_row_q3_K(const BlockQ3_K* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, y += kQK_K) {
    const float d_all = fp16_to_fp32(x[b].d);
    for (int s = 0; s < 16; ++s) {
      const float dl = d_all * q3_k_scale(x[b].scales, s);
      for (int l = 0; l < 16; ++l) {
        const int i = 16 * s + l;
        const int high = (x[b].hmask[i % 32] >> (i / 32)) & 1;
        y[i] = dl * (unpack_2bit(x[b].qs, i) + 4 * high - 4);
      }
    }
  }
}

}  // namespace ponder
