// Q4_K, Q5_K, Q6_K and Q8_K: super-blocks of 256 with 6- or 8-bit sub-block scales. Each
// sub-block's scale (and min) is searched first (scale_search.h); the scales are then quantized
// against one F16 super-block scale, and the values re-rounded against the scales as stored.
// Q2_K and Q3_K are in quant_k_low.cc.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "quant/half.h"
#include "quant/quant_rows.h"
#include "quant/scale_search.h"

namespace ponder {

using quant_internal::kGroupMaxEps;
using quant_internal::round_nearest;

namespace {

// Searches 8 sub-blocks of 32 for Q4_K / Q5_K (levels 0..nmax), packs their 6-bit scales and
// mins into `scales`, sets d / dmin, and re-rounds the levels L against the stored values.
void quantize_affine_super_block(const float* x, int nmax, float rmin, int nstep, uint8_t* L,
                                 uint16_t* d_out, uint16_t* dmin_out, uint8_t* scales) {
  float sub_scale[8];
  float sub_min[8];
  float max_scale = 0.0f;  // scales are positive since the min is subtracted
  float max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float* xs = x + 32 * j;
    float sum_x2 = 0.0f;
    for (int l = 0; l < 32; ++l) sum_x2 += xs[l] * xs[l];
    // Weight errors by magnitude, floored by the group's RMS so small values still count.
    const float av_x = std::sqrt(sum_x2 / 32.0f);
    float weights[32];
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(xs[l]);
    sub_scale[j] = quant_internal::search_affine_scale(32, nmax, xs, weights, L + 32 * j,
                                                       &sub_min[j], rmin, 0.1f, nstep, false);
    max_scale = std::max(max_scale, sub_scale[j]);
    max_min = std::max(max_min, sub_min[j]);
  }

  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  std::memset(scales, 0, kKScaleSize);
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls =
        std::min<uint8_t>(63, static_cast<uint8_t>(round_nearest(inv_scale * sub_scale[j])));
    const uint8_t lm =
        std::min<uint8_t>(63, static_cast<uint8_t>(round_nearest(inv_min * sub_min[j])));
    // Sub-blocks 0-3 keep their 6 bits in bytes 0-3 (scale) and 4-7 (min); sub-blocks 4-7 put
    // their low nibbles in bytes 8-11 and their top 2 bits in the top bits of bytes 0-7.
    if (j < 4) {
      scales[j] = ls;
      scales[j + 4] = lm;
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls & 0xf) | ((lm & 0xf) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  *d_out = fp32_to_fp16(max_scale / 63.0f);
  *dmin_out = fp32_to_fp16(max_min / 63.0f);

  const float d_all = fp16_to_fp32(*d_out);
  const float dmin_all = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, scales, &sc, &m);
    const float d = d_all * sc;
    if (d == 0.0f) continue;
    const float dm = dmin_all * m;
    for (int l = 0; l < 32; ++l) {
      L[32 * j + l] =
          static_cast<uint8_t>(std::clamp(round_nearest((x[32 * j + l] + dm) / d), 0, nmax));
    }
  }
}

}  // namespace

void quantize_row_q4_K(const float* x, BlockQ4_K* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_affine_super_block(x, 15, -1.0f, 20, L, &y[b].d, &y[b].dmin, y[b].scales);
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        y[b].qs[32 * p + l] = static_cast<uint8_t>(L[64 * p + l] | (L[64 * p + 32 + l] << 4));
      }
    }
  }
}

void quantize_row_q5_K(const float* x, BlockQ5_K* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    uint8_t L[kQK_K];
    quantize_affine_super_block(x, 31, -0.5f, 15, L, &y[b].d, &y[b].dmin, y[b].scales);
    std::memset(y[b].qh, 0, sizeof(y[b].qh));
    for (int p = 0; p < 4; ++p) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * p + l];
        const int hi = L[64 * p + 32 + l];
        y[b].qs[32 * p + l] = static_cast<uint8_t>((lo & 0xf) | ((hi & 0xf) << 4));
        y[b].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * p)) | ((hi >> 4) << (2 * p + 1)));
      }
    }
  }
}

void quantize_row_q6_K(const float* x, BlockQ6_K* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    int8_t L[kQK_K];
    float sub_scale[16];
    float max_scale = 0.0f;  // the scale of largest magnitude, with its sign
    float max_abs_scale = 0.0f;
    for (int s = 0; s < 16; ++s) {
      sub_scale[s] =
          quant_internal::search_symmetric_scale(16, 32, x + 16 * s, L + 16 * s, nullptr);
      if (std::fabs(sub_scale[s]) > max_abs_scale) {
        max_abs_scale = std::fabs(sub_scale[s]);
        max_scale = sub_scale[s];
      }
    }
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&y[b], 0, sizeof(BlockQ6_K));
      continue;
    }
    // 8-bit signed sub-block scales; the largest maps onto -128.
    const float iscale = -128.0f / max_scale;
    y[b].d = fp32_to_fp16(1.0f / iscale);
    for (int s = 0; s < 16; ++s) {
      y[b].scales[s] = static_cast<int8_t>(std::min(127, round_nearest(iscale * sub_scale[s])));
    }
    const float d_all = fp16_to_fp32(y[b].d);
    for (int s = 0; s < 16; ++s) {
      const float d = d_all * y[b].scales[s];
      if (d == 0.0f) continue;
      for (int l = 0; l < 16; ++l) {
        L[16 * s + l] =
            static_cast<int8_t>(std::clamp(round_nearest(x[16 * s + l] / d), -32, 31) + 32);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const int8_t* Lh = L + 128 * h;
      uint8_t* ql = y[b].ql + 64 * h;
      uint8_t* qh = y[b].qh + 32 * h;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((Lh[l] & 0xf) | ((Lh[l + 64] & 0xf) << 4));
        ql[l + 32] = static_cast<uint8_t>((Lh[l + 32] & 0xf) | ((Lh[l + 96] & 0xf) << 4));
        qh[l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                     ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
      }
    }
  }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float max = 0.0f;
    float amax = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    // -127 (not -128) for the extreme value keeps every level within int8 after negation.
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j) {
      y[b].qs[j] = static_cast<int8_t>(std::min(127, round_nearest(iscale * x[j])));
    }
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[b].qs[16 * g + l];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

void dequantize_row_q4_K(const BlockQ4_K* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int p = 0; p < 4; ++p) {
      uint8_t sc, m;
      get_scale_min_k4(2 * p, x[b].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(2 * p + 1, x[b].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const uint8_t* q = x[b].qs + 32 * p;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xf) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dequantize_row_q5_K(const BlockQ5_K* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    const float dmin = fp16_to_fp32(x[b].dmin);
    for (int p = 0; p < 4; ++p) {
      uint8_t sc, m;
      get_scale_min_k4(2 * p, x[b].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      get_scale_min_k4(2 * p + 1, x[b].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      const uint8_t* q = x[b].qs + 32 * p;
      const uint8_t* qh = x[b].qh;
      for (int l = 0; l < 32; ++l) {
        *y++ = d1 * ((q[l] & 0xf) + (((qh[l] >> (2 * p)) & 1) << 4)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *y++ = d2 * ((q[l] >> 4) + (((qh[l] >> (2 * p + 1)) & 1) << 4)) - m2;
      }
    }
  }
}

void dequantize_row_q6_K(const BlockQ6_K* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = fp16_to_fp32(x[b].d);
    for (int h = 0; h < 2; ++h, y += 128) {
      const uint8_t* ql = x[b].ql + 64 * h;
      const uint8_t* qh = x[b].qh + 32 * h;
      const int8_t* sc = x[b].scales + 8 * h;
      for (int l = 0; l < 32; ++l) {
        const int s = l / 16;
        const int q0 = ((ql[l] & 0xf) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0xf) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[s] * q0;
        y[l + 32] = d * sc[s + 2] * q1;
        y[l + 64] = d * sc[s + 4] * q2;
        y[l + 96] = d * sc[s + 6] * q3;
      }
    }
  }
}

void dequantize_row_q8_K(const BlockQ8_K* x, float* y, int64_t n) {
  PONDER_DCHECK(n % kQK_K == 0);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    for (int j = 0; j < kQK_K; ++j) *y++ = x[b].d * x[b].qs[j];
  }
}

}  // namespace ponder
