#include "kernels/dot_ggml_order.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "quant/blocks.h"
#include "quant/half.h"

namespace ponder {
namespace {

// Activations for Q4_1 / Q5_1: x = d * q, and s = d * sum(q) (ggml's block_q8_1).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

// The horizontal sum of 8 float lanes used by every x86 kernel (hsum_float_8): upper half + lower
// half, then pairs two apart, then the last two.
float hsum8(const float a[8]) {
  const float r0 = a[4] + a[0], r1 = a[5] + a[1], r2 = a[6] + a[2], r3 = a[7] + a[3];
  return (r0 + r2) + (r1 + r3);
}

// The same reduction for 4 lanes (movehl + movehdup).
float hsum4(const float a[4]) { return (a[0] + a[2]) + (a[1] + a[3]); }

// Round to nearest, ties to even, as _mm256_round_ps(_MM_ROUND_NEAREST) and ggml's nearest_int.
int round_even(float v) { return static_cast<int>(std::nearbyint(v)); }

// --- activation quantizers ---------------------------------------------------------------------

// AVX2 quantize_row_q8_0 / q8_1: amax over the block, d = amax / 127 (stored as f16),
// q = round_even(x * (127 / amax)); Q8_1 also stores s = f16(d * sum(q)) with the unrounded d.
template <bool kWithSum, typename Block>
void quantize_q8_legacy(const float* x, Block* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    y[b].d = fp32_to_fp16(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      const int q = std::clamp(round_even(x[j] * id), -128, 127);
      y[b].qs[j] = static_cast<int8_t>(q);
      sum += q;
    }
    if constexpr (kWithSum) y[b].s = fp32_to_fp16(d * static_cast<float>(sum));
  }
}

// x86 has no SIMD Q8_K quantizer; llama.cpp runs quantize_row_q8_K_ref: the signed value `max` of
// largest magnitude (first one wins), iscale = -127 / max, q = min(127, round_even(iscale * x)),
// d = 1 / iscale, bsums = sums of 16 quants.
void quantize_q8_K(const float* x, BlockQ8_K* y, int64_t n) {
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQK_K; ++j) {
      const float ax = std::fabs(x[j]);
      if (ax > amax) {
        amax = ax;
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&y[b], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQK_K; ++j)
      y[b].qs[j] = static_cast<int8_t>(std::min(127, round_even(iscale * x[j])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * g + j];
      y[b].bsums[g] = static_cast<int16_t>(sum);
    }
    y[b].d = 1.0f / iscale;
  }
}

// --- legacy (32-element block) formats -----------------------------------------------------------

// Quant j of a 4-bit block: low nibbles hold elements 0..15, high nibbles 16..31.
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); }
inline int high_bit(const uint8_t qh[4], int j) { return (qh[j / 8] >> (j % 8)) & 1; }

// The common shape of ggml_vec_dot_{q5_0,q8_0}_q8_0 (AVX2): per block, lane l gets the exact
// integer sum of the 4 products of elements 4l..4l+3, and acc[l] = fma(dw * dx, float(sum),
// acc[l]); the result is hsum8(acc). Quant(block, j) returns the signed weight quant.
template <typename Block, typename Quant>
float dot_q8_0_family(const void* w_row, const void* x_row, int64_t n, Quant quant) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(x_row);
  float acc[8] = {};
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d);
    for (int l = 0; l < 8; ++l) {
      int sum = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) sum += quant(w[b], j) * x[b].qs[j];
      acc[l] = std::fma(d, static_cast<float>(sum), acc[l]);
    }
  }
  return hsum8(acc);
}

// ggml_vec_dot_{q4_1,q5_1}_q8_1 (AVX2): lanes as above with the unsigned quants and
// acc[l] = fma(dw * dx, float(sum), acc[l]); the offsets go to a separate scalar
// summs = fma(m, s, summs) (GCC contracts ggml's `summs += m * s`); result hsum8(acc) + summs.
template <typename Block, typename Quant>
float dot_q8_1_family(const void* w_row, const void* x_row, int64_t n, Quant quant) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_1* x = static_cast<const BlockQ8_1*>(x_row);
  float acc[8] = {};
  float summs = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    summs = std::fma(fp16_to_fp32(w[b].m), fp16_to_fp32(x[b].s), summs);
    const float d = fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d);
    for (int l = 0; l < 8; ++l) {
      int sum = 0;
      for (int j = 4 * l; j < 4 * l + 4; ++j) sum += quant(w[b], j) * x[b].qs[j];
      acc[l] = std::fma(d, static_cast<float>(sum), acc[l]);
    }
  }
  return hsum8(acc) + summs;
}

// --- K formats -----------------------------------------------------------------------------------

// The 8 six-bit scales and mins of Q4_K / Q5_K.
void scales_mins_k4(const uint8_t s[kKScaleSize], int sc[8], int m[8]) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
    sc[j + 4] = (s[j + 8] & 0xF) | ((s[j] >> 6) << 4);
    m[j + 4] = (s[j + 8] >> 4) | ((s[j + 4] >> 6) << 4);
  }
}

// The Q4_K / Q5_K min term of the AVX2 kernels: pairs of bsums summed to 8 sub-block sums, then
// 4 int32 lanes, lane p = m[2p] * sums[2p] + m[2p+1] * sums[2p+1].
void k4_min_lanes(const int m[8], const int16_t bsums[16], int prod[4]) {
  int sums[8];
  for (int k = 0; k < 8; ++k) sums[k] = bsums[2 * k] + bsums[2 * k + 1];
  for (int p = 0; p < 4; ++p) prod[p] = m[2 * p] * sums[2 * p] + m[2 * p + 1] * sums[2 * p + 1];
}

}  // namespace

GgmlType dot_activation_type(GgmlType w) {
  switch (w) {
    case GgmlType::F32:
      return GgmlType::F32;
    case GgmlType::F16:
      return GgmlType::F16;
    case GgmlType::BF16:
      return GgmlType::BF16;
    case GgmlType::Q4_0:
    case GgmlType::Q5_0:
    case GgmlType::Q8_0:
      return GgmlType::Q8_0;
    case GgmlType::Q4_1:
    case GgmlType::Q5_1:
      return GgmlType::Q8_1;
    default:
      return GgmlType::Q8_K;
  }
}

void quantize_activation_row(GgmlType at, const float* x, void* dst, int64_t n) {
  switch (at) {
    case GgmlType::F32:
      std::memcpy(dst, x, static_cast<size_t>(n) * sizeof(float));
      return;
    case GgmlType::F16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(x[i]);
      return;
    }
    case GgmlType::BF16: {
      uint16_t* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(x[i]);
      return;
    }
    case GgmlType::Q8_0:
      quantize_q8_legacy<false>(x, static_cast<BlockQ8_0*>(dst), n);
      return;
    case GgmlType::Q8_1:
      quantize_q8_legacy<true>(x, static_cast<BlockQ8_1*>(dst), n);
      return;
    default:
      quantize_q8_K(x, static_cast<BlockQ8_K*>(dst), n);
      return;
  }
}

// --- float weights -------------------------------------------------------------------------------

namespace {

inline float load_f32(const float* p, int64_t i) { return p[i]; }
inline float load_f16(const uint16_t* p, int64_t i) { return fp16_to_fp32(p[i]); }

// GCC's _mm512_reduce_add_ps: upper + lower 8, then 4, then pairs two apart, then the last two.
float reduce16(const float a[16]) {
  float t8[8], t4[4];
  for (int l = 0; l < 8; ++l) t8[l] = a[l + 8] + a[l];
  for (int l = 0; l < 4; ++l) t4[l] = t8[l + 4] + t8[l];
  return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

// ggml_vec_dot_f16 / ggml_vec_dot_f32 as compiled for AVX-512 (STEP 64 = 4 accumulators x 16
// lanes): acc[j][l] = fma(x, y, acc[j][l]) for element 64 i + 16 j + l; then acc0 += acc2,
// acc1 += acc3, acc0 += acc1; reduce16. Leftovers (n % 64): F16 adds them in double, F32 in float.
template <typename T, float (*kLoad)(const T*, int64_t), bool kF16>
float vec_dot_4x16(const T* x, const T* y, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  float acc[4][16] = {};
  for (int64_t i = 0; i < np; i += 64) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 16; ++l) {
        const int64_t e = i + 16 * j + l;
        acc[j][l] = std::fma(kLoad(x, e), kLoad(y, e), acc[j][l]);
      }
    }
  }
  float a[16];
  for (int l = 0; l < 16; ++l) a[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
  if constexpr (kF16) {
    double sum = reduce16(a);
    for (int64_t e = np; e < n; ++e) sum += static_cast<double>(kLoad(x, e) * kLoad(y, e));
    return static_cast<float>(sum);
  } else {
    // GCC 12 vectorizes this leftover loop: in runs of 8 the products are rounded and added one by
    // one; only the last n % 8 elements are fused multiply-adds.
    float sum = reduce16(a);
    const int64_t n8 = np + ((n - np) & ~int64_t{7});
    for (int64_t e = np; e < n8; ++e) sum += kLoad(x, e) * kLoad(y, e);
    for (int64_t e = n8; e < n; ++e) sum = std::fma(kLoad(x, e), kLoad(y, e), sum);
    return sum;
  }
}

}  // namespace

float dot_f16_ggml(const uint16_t* x, const uint16_t* y, int64_t n) {
  return vec_dot_4x16<uint16_t, load_f16, true>(x, y, n);
}

void weighted_rows_f16_ggml(const uint16_t* const* rows, const uint16_t* probs, int64_t n,
                            int64_t dim, float* out, float* scratch) {
  // acc[lane][i] with lane = p % 64 = 16 j + l: vec_dot_4x16's accumulator acc[j][l] of column i.
  float* acc = scratch;
  std::fill(acc, acc + 64 * dim, 0.0f);
  for (int64_t p = 0; p < n; ++p) {
    const float w = load_f16(probs, p);
    float* a = acc + (p % 64) * dim;
    const uint16_t* v = rows[p];
    for (int64_t i = 0; i < dim; ++i) a[i] = std::fma(load_f16(v, i), w, a[i]);
  }
  for (int64_t i = 0; i < dim; ++i) {
    float lanes[16];
    for (int l = 0; l < 16; ++l) {
      lanes[l] = (acc[l * dim + i] + acc[(32 + l) * dim + i]) +
                 (acc[(16 + l) * dim + i] + acc[(48 + l) * dim + i]);
    }
    out[i] = static_cast<float>(static_cast<double>(reduce16(lanes)));
  }
}

float dot_f32(const void* w_row, const void* x_row, int64_t n) {
  return vec_dot_4x16<float, load_f32, false>(static_cast<const float*>(w_row),
                                              static_cast<const float*>(x_row), n);
}

float dot_f16(const void* w_row, const void* x_row, int64_t n) {
  return dot_f16_ggml(static_cast<const uint16_t*>(w_row), static_cast<const uint16_t*>(x_row), n);
}

namespace {

// DAZ on inputs and FTZ on results, as vdpbf16ps does them: a subnormal becomes a zero of its sign.
inline float flush_subnormal(float v) {
  const uint32_t b = std::bit_cast<uint32_t>(v);
  return (b & 0x7f800000u) == 0 ? std::bit_cast<float>(b & 0x80000000u) : v;
}

}  // namespace

float vdpbf16ps_lane(float acc, uint32_t a_pair, uint32_t b_pair) {
  const auto hi = [](uint32_t p) { return flush_subnormal(std::bit_cast<float>(p & 0xffff0000u)); };
  const auto lo = [](uint32_t p) { return flush_subnormal(std::bit_cast<float>(p << 16)); };
  const float t = flush_subnormal(std::fma(hi(a_pair), hi(b_pair), flush_subnormal(acc)));
  return flush_subnormal(std::fma(lo(a_pair), lo(b_pair), t));
}

// BF16 weights: llama.cpp (x86, AVX512BF16) multiplies batches of 2+ rows with llamafile's tinyBLAS
// (sgemm.cpp, tinyBLAS<32, __m512, __m512bh, ...>) and single rows with ggml_vec_dot_bf16; we keep
// one order for every batch size (batch invariance) and take tinyBLAS's, which reproduces the
// golden prompt rows bit for bit (vec_dot's does not: docs/numerics.md). Per output: one
// accumulator of 16 lanes, one vdpbf16ps per 32 elements (lane l gets the pair i + 2l, i + 2l + 1),
// then _mm512_reduce_add_ps's order (reduce16), in float. Rows with n % 32 != 0 (llama.cpp then
// falls back to vec_dot; no model of this family has them) get one more step on the leftover pairs
// padded with zeros.
float dot_bf16(const void* w_row, const void* x_row, int64_t n) {
  const uint16_t* w = static_cast<const uint16_t*>(w_row);
  const uint16_t* x = static_cast<const uint16_t*>(x_row);
  const auto pair = [n](const uint16_t* p, int64_t e) {
    const uint32_t lo = e < n ? p[e] : 0, hi = e + 1 < n ? p[e + 1] : 0;
    return lo | hi << 16;
  };
  float c[16] = {};
  for (int64_t i = 0; i < n; i += 32) {
    for (int l = 0; l < 16; ++l) {
      c[l] = vdpbf16ps_lane(c[l], pair(w, i + 2 * l), pair(x, i + 2 * l));
    }
  }
  return reduce16(c);
}

// Q4_0 is not done by ggml_vec_dot_q4_0_q8_0: on AVX2 machines llama.cpp repacks Q4_0 weights into
// 8-row interleaved blocks (CPU_REPACK, q4_0_8x8) and multiplies with ggml_gemm /
// ggml_gemv_q4_0_8x8_q8_0 (arch/x86/repack.cpp). Their float order per output: one scalar
// accumulator, acc = fma(float(exact integer dot of the whole block), dw * dx, acc) over the
// blocks. The Q4_0 goldens are bit-identical with this order and not with vec_dot's 8 lanes.
float dot_q4_0(const void* w_row, const void* x_row, int64_t n) {
  const BlockQ4_0* w = static_cast<const BlockQ4_0*>(w_row);
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    int sum = 0;
    for (int j = 0; j < kQK; ++j) sum += (nibble(w[b].qs, j) - 8) * x[b].qs[j];
    acc = std::fma(static_cast<float>(sum), fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), acc);
  }
  return acc;
}

// ggml_vec_dot_q5_0_q8_0 (AVX2): weight quants (nibble | bit4 << 4) - 16.
float dot_q5_0(const void* w_row, const void* x_row, int64_t n) {
  return dot_q8_0_family<BlockQ5_0>(w_row, x_row, n, [](const BlockQ5_0& b, int j) {
    return (nibble(b.qs, j) | (high_bit(b.qh, j) << 4)) - 16;
  });
}

// ggml_vec_dot_q8_0_q8_0 (AVX2).
float dot_q8_0(const void* w_row, const void* x_row, int64_t n) {
  return dot_q8_0_family<BlockQ8_0>(w_row, x_row, n,
                                    [](const BlockQ8_0& b, int j) { return int(b.qs[j]); });
}

// ggml_vec_dot_q4_1_q8_1 (AVX2).
float dot_q4_1(const void* w_row, const void* x_row, int64_t n) {
  return dot_q8_1_family<BlockQ4_1>(w_row, x_row, n,
                                    [](const BlockQ4_1& b, int j) { return nibble(b.qs, j); });
}

// ggml_vec_dot_q5_1_q8_1 (AVX2; it writes fma(q, dw * dx, acc), the same operation).
float dot_q5_1(const void* w_row, const void* x_row, int64_t n) {
  return dot_q8_1_family<BlockQ5_1>(w_row, x_row, n, [](const BlockQ5_1& b, int j) {
    return nibble(b.qs, j) | (high_bit(b.qh, j) << 4);
  });
}

namespace {

// The quant lanes of the K-quants in ggml's AVX2 layout: lane l sums, over the 8 chunks c of 32
// elements, scale(c, l) times the products of the quants quant(c, e) at e = 4l..4l+3 of chunk c
// with x's; then acc[l] = fma(d, lane, acc[l]). The lanes are exact integer sums. (Q2_K, Q3_K and
// Q6_K have a scale per 16 elements: scale(c, l) is that of elements 32c + 16 (l / 4) on.)
template <class Scale, class Quant>
void k_quant_lanes(const BlockQ8_K& x, float d, const Scale& scale, const Quant& quant,
                   float (&acc)[8]) {
  for (int l = 0; l < 8; ++l) {
    int sumi = 0;
    for (int c = 0; c < 8; ++c) {
      int p = 0;
      for (int e = 4 * l; e < 4 * l + 4; ++e) p += quant(c, e) * x.qs[32 * c + e];
      sumi += scale(c, l) * p;
    }
    acc[l] = std::fma(d, static_cast<float>(sumi), acc[l]);
  }
}

// Q4_K / Q5_K's low 4 bits of element e of chunk c: chunks 2j and 2j + 1 share the bytes
// qs[32j ..], low and high nibbles.
inline int nibble_of_chunk(const uint8_t* qs, int c, int e) {
  const uint8_t q = qs[32 * (c / 2) + e];
  return c % 2 == 0 ? q & 0xF : q >> 4;
}

// A K-quant dot of 8 float lanes: block(w[b], x[b], acc) for each super-block, then hsum8(acc).
template <class Block, class PerBlock>
float k_dot8(const void* w_row, const void* x_row, int64_t n, const PerBlock& block) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* x = static_cast<const BlockQ8_K*>(x_row);
  float acc[8] = {};
  for (int64_t b = 0; b < n / kQK_K; ++b) block(w[b], x[b], acc);
  return hsum8(acc);
}

// Q4_K and Q5_K: per super-block the scales and mins (scales_mins_k4), the 4 min lanes
// (k4_min_lanes) given to mins(-dx * dmin, lanes) first, then the quant lanes of quant(w, c, e)
// with the scales sc[c]; returns hsum8 of the quant lanes.
template <class Block, class Mins, class Quant>
float k4_dot(const void* w_row, const void* x_row, int64_t n, const Mins& mins,
             const Quant& quant) {
  return k_dot8<Block>(w_row, x_row, n, [&](const Block& w, const BlockQ8_K& x, float(&acc)[8]) {
    int sc[8], m[8], prod[4];
    scales_mins_k4(w.scales, sc, m);
    k4_min_lanes(m, x.bsums, prod);
    mins(-x.d * fp16_to_fp32(w.dmin), prod);
    k_quant_lanes(
        x, x.d * fp16_to_fp32(w.d), [&](int c, int) { return sc[c]; },
        [&](int c, int e) { return quant(w, c, e); }, acc);
  });
}

}  // namespace

// ggml_vec_dot_q2_K_q8_K (AVX2). Per super-block: first the mins, 8 int32 lanes
// lane l = min[2l] * bsums[2l] + min[2l+1] * bsums[2l+1], acc[l] = fma(-dx * dmin, lane, acc[l]);
// then the quants: lane l sums, over the 8 chunks of 32 elements, scale * (the 4 products at
// chunk offsets 4l..4l+3), acc[l] = fma(dx * d, lane, acc[l]). Result hsum8(acc).
float dot_q2_K(const void* w_row, const void* x_row, int64_t n) {
  return k_dot8<BlockQ2_K>(
      w_row, x_row, n, [](const BlockQ2_K& wb, const BlockQ8_K& xb, float(&acc)[8]) {
        const float d = xb.d * fp16_to_fp32(wb.d);
        const float dmin = -xb.d * fp16_to_fp32(wb.dmin);
        for (int l = 0; l < 8; ++l) {
          const int prod = (wb.scales[2 * l] >> 4) * xb.bsums[2 * l] +
                           (wb.scales[2 * l + 1] >> 4) * xb.bsums[2 * l + 1];
          acc[l] = std::fma(dmin, static_cast<float>(prod), acc[l]);
        }
        k_quant_lanes(
            xb, d, [&](int c, int l) { return wb.scales[2 * c + l / 4] & 0xF; },
            [&](int c, int e) { return (wb.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3; }, acc);
      });
}

// ggml_vec_dot_q3_K_q8_K (AVX2): integer lanes as Q2_K's quant part with quants q - 4 and signed
// 6-bit scales (sc - 32), acc[l] = fma(dx * d, lane, acc[l]); result hsum8(acc).
float dot_q3_K(const void* w_row, const void* x_row, int64_t n) {
  return k_dot8<BlockQ3_K>(w_row, x_row, n,
                           [](const BlockQ3_K& wb, const BlockQ8_K& xb, float(&acc)[8]) {
                             const float d = xb.d * fp16_to_fp32(wb.d);
                             const uint8_t* s = wb.scales;
                             int sc[16];
                             for (int i = 0; i < 16; ++i) {
                               const int lo = i < 8 ? (s[i] & 0xF) : (s[i - 8] >> 4);
                               const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
                               sc[i] = (lo | (hi << 4)) - 32;
                             }
                             k_quant_lanes(
                                 xb, d, [&](int c, int l) { return sc[2 * c + l / 4]; },
                                 [&](int c, int e) {
                                   const int low = (wb.qs[32 * (c / 4) + e] >> (2 * (c % 4))) & 3;
                                   const int high = (wb.hmask[e] >> c) & 1;
                                   return low - (high ? 0 : 4);
                                 },
                                 acc);
                           });
}

// ggml_vec_dot_q4_K_q8_K (AVX2). Quant lanes: over the 4 chunks of 64 elements, lane l adds
// sc[2j] * (products at 64j + 4l..4l+3) + sc[2j+1] * (products at 64j + 32 + 4l..4l+3);
// acc[l] = fma(dx * d, lane, acc[l]). Mins: 4 lanes (k4_min_lanes), accm[p] =
// fma(-dx * dmin, lane, accm[p]). Result hsum8(acc) + hsum4(accm).
float dot_q4_K(const void* w_row, const void* x_row, int64_t n) {
  float accm[4] = {};
  const float quants = k4_dot<BlockQ4_K>(
      w_row, x_row, n,
      [&](float dmin, const int(&prod)[4]) {
        for (int p = 0; p < 4; ++p) accm[p] = std::fma(dmin, static_cast<float>(prod[p]), accm[p]);
      },
      [](const BlockQ4_K& w, int c, int e) { return nibble_of_chunk(w.qs, c, e); });
  return quants + hsum4(accm);
}

// ggml_vec_dot_q5_K_q8_K (AVX2): quant lanes as Q4_K with 5-bit quants. The mins are reduced to one
// integer (lanes as Q4_K, summed (p0 + p1) + (p2 + p3)) and accumulated in a scalar
// summs = fma(-dx * dmin, float(total), summs) (GCC contracts ggml's `summs += dmin * total`).
// Result hsum8(acc) + summs.
float dot_q5_K(const void* w_row, const void* x_row, int64_t n) {
  float summs = 0.0f;
  const float quants = k4_dot<BlockQ5_K>(
      w_row, x_row, n,
      [&](float dmin, const int(&prod)[4]) {
        summs =
            std::fma(dmin, static_cast<float>((prod[0] + prod[1]) + (prod[2] + prod[3])), summs);
      },
      [](const BlockQ5_K& w, int c, int e) {
        return nibble_of_chunk(w.qs, c, e) | (((w.qh[e] >> c) & 1) << 4);
      });
  return quants + summs;
}

// ggml_vec_dot_q6_K_q8_K (AVX2) as the goldens' llama.cpp had it: quant lanes as Q3_K's with the
// quants q - 32 and int8 scales, acc[l] = fma(dx * d, lane, acc[l]); result hsum8(acc).
// Current llama.cpp instead subtracts 32 * (sc[2l] * bsums[2l] + sc[2l+1] * bsums[2l+1]) from lane
// l, a different split of the same integer over the lanes; the goldens' logits are bit-identical
// only with the per-element offset used here (measured: ~40% of logits were 1 ulp off before).
float dot_q6_K(const void* w_row, const void* x_row, int64_t n) {
  return k_dot8<BlockQ6_K>(
      w_row, x_row, n, [](const BlockQ6_K& wb, const BlockQ8_K& xb, float(&acc)[8]) {
        const float d = xb.d * fp16_to_fp32(wb.d);
        const int8_t* sc = wb.scales;
        k_quant_lanes(
            xb, d, [&](int c, int l) { return static_cast<int>(sc[2 * c + l / 4]); },
            [&](int c, int e) {
              const int h = c / 4, k = c % 4;
              const uint8_t ql = wb.ql[64 * h + 32 * (k % 2) + e];
              const int low = k < 2 ? (ql & 0xF) : (ql >> 4);
              const int high = (wb.qh[32 * h + e] >> (2 * k)) & 3;
              return (low | (high << 4)) - 32;
            },
            acc);
      });
}

RowDotFn row_dot_function(GgmlType w, int64_t n_rows) {
  switch (w) {
    case GgmlType::F32:
      return dot_f32;
    case GgmlType::F16:
      return dot_f16;
    case GgmlType::BF16:
      return dot_bf16;
    case GgmlType::Q4_0:
      return dot_q4_0;
    case GgmlType::Q4_1:
      return dot_q4_1;
    case GgmlType::Q5_0:
      return dot_q5_0;
    case GgmlType::Q5_1:
      return dot_q5_1;
    case GgmlType::Q8_0:
      return dot_q8_0;
    case GgmlType::Q2_K:
      return dot_q2_K;
    case GgmlType::Q3_K:
      return dot_q3_K;
    case GgmlType::Q4_K:
      return dot_q4_K;
    case GgmlType::Q5_K:
      return dot_q5_K;
    case GgmlType::Q6_K:
      return dot_q6_K;
    default:
      return nullptr;
  }
}

}  // namespace ponder
