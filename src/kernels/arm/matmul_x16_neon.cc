// NEON dot-product kernels for weights in the x16 layouts (kernels/interleave.h). A 64-byte piece
// of the layout is 4 vectors of 16 bytes, rows 0-3, 4-7, 8-11 and 12-15 of a group, 4 consecutive
// weights of each row; one sdot (vdotq_laneq_s32) multiplies such a vector with 4 activation bytes
// (one 32-bit lane of a loaded activation vector) into 4 per-row 32-bit sums. After a sub-block
// those sums are the rows' exact integer sub-block sums, scaled by the rows' scales (vmlaq_s32);
// per super-block one fused multiply-add per row (vfmaq_f32; one more for Q4_K's mins), as the
// x16 order says, so results are bitwise those of dot_q4_K_x16_order / dot_q6_K_x16_order /
// dot_q8_0_x16_order for any batch size.
//
// Up to 4 activation rows share each weight vector load. A group of 16 rows is worked in two
// halves of 8 rows (2 vectors), so that for 4 activation rows the sub-block sums (8 registers),
// the super-block totals (8), the activation vectors (8) and the weights fit the 32 vector
// registers; both halves of a super-block run back to back, so its weights come from memory once.
//
// Compiled with -march=armv8.2-a+dotprod (GCC's sdot intrinsics need armv8.2-a), which also allows
// instructions an ARMv8.0 CPU lacks (LSE atomics): an inline function of a shared header compiled
// here could be the copy the linker keeps for every caller, so this file calls none (it defines no
// weak symbols: check with nm).
#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "kernels/arm/arm_kernels.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/interleave.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

#define PONDER_INLINE inline __attribute__((always_inline))

int64_t round_up_64(int64_t n) { return (n + 63) / 64 * 64; }

// Rows of a group per half, and 16-byte weight vectors per half (rows 0-3 and 4-7 of the half).
constexpr int kHalfRows = 8;
constexpr int kHalfVecs = 2;

// Four f16 values to f32 (exact, as fp16_to_fp32).
PONDER_INLINE float32x4_t load_f16x4(const uint16_t* p) {
  return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p)));
}

// The 8 unsigned bytes at p as 32-bit lanes: rows 0-3 and 4-7 of a half.
PONDER_INLINE void widen_u8x8(const uint8_t* p, int32x4_t out[2]) {
  const uint16x8_t v = vmovl_u8(vld1_u8(p));
  out[0] = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(v)));
  out[1] = vreinterpretq_s32_u32(vmovl_high_u16(v));
}

PONDER_INLINE void widen_s8x8(const int8_t* p, int32x4_t out[2]) {
  const int16x8_t v = vmovl_s8(vld1_s8(p));
  out[0] = vmovl_s16(vget_low_s16(v));
  out[1] = vmovl_high_s16(v);
}

// s[r][i] += products of weight vector w[i] with the 4 bytes in lane L of xv[r].
template <int R, int L>
PONDER_INLINE void sdot_lane(int32x4_t (&s)[R][kHalfVecs], const int8x16_t (&w)[kHalfVecs],
                             const int8x16_t (&xv)[R]) {
  for (int r = 0; r < R; ++r) {
    for (int i = 0; i < kHalfVecs; ++i) s[r][i] = vdotq_laneq_s32(s[r][i], w[i], xv[r], L);
  }
}

// --- Q4_K and Q6_K -------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants and scale, -32 * each sum of 16
// quants (the start value of a Q6_K sub-block, undoing its codes' offset of 32) and the sums of 32
// quants paired as Q4_K's mins are (pair p: sub-blocks 2p, 2p + 1 in one 32-bit word).
struct alignas(16) ActK {
  int8_t qs[kQK_K];
  int32_t q6_start[16];
  int16_t sums32[8];
  float d;
};
static_assert(sizeof(ActK) == 352);

int64_t k_packed_row_bytes(int64_t n_in) {
  return round_up_64(n_in / kQK_K * static_cast<int64_t>(sizeof(ActK)));
}

// Rounded by the reference quantizer itself (one super-block at a time: each has its own scale).
void k_pack_row(const float* x, void* dst, int64_t n_in) {
  ActK* a = static_cast<ActK*>(dst);
  for (int64_t b = 0; b < n_in / kQK_K; ++b) {
    BlockQ8_K q;
    quantize_activation_row(GgmlType::Q8_K, x + b * kQK_K, &q, kQK_K);
    std::memcpy(a[b].qs, q.qs, kQK_K);
    for (int s = 0; s < 16; ++s) a[b].q6_start[s] = -32 * q.bsums[s];
    for (int c = 0; c < 8; ++c)
      a[b].sums32[c] = static_cast<int16_t>(q.bsums[2 * c] + q.bsums[2 * c + 1]);
    a[b].d = q.d;
  }
}

struct Q4K {
  using Block = BlockQ4KX16;
  using Act = ActK;
  static constexpr int kBlockElements = kQK_K;
  static constexpr auto packed_row_bytes = k_packed_row_bytes;

  // Lane L of the activation vectors against weights qs[p][4 kq + L] of this half: low nibbles
  // (sub-block 2p) or high nibbles (2p + 1).
  template <int R, int L, bool kHigh>
  static PONDER_INLINE void step(const uint8_t* q, const int8x16_t (&xv)[R],
                                 int32x4_t (&s)[R][kHalfVecs]) {
    int8x16_t w[kHalfVecs];
    for (int i = 0; i < kHalfVecs; ++i) {
      const uint8x16_t raw = vld1q_u8(q + 16 * i);
      w[i] = vreinterpretq_s8_u8(kHigh ? vshrq_n_u8(raw, 4) : vandq_u8(raw, vdupq_n_u8(0x0F)));
    }
    sdot_lane<R, L>(s, w, xv);
  }

  // t[r][i] += sc * (sub-block 2p + kHigh's integer sum), rows of half `half`.
  template <int R, bool kHigh>
  static PONDER_INLINE void sub_block(const Block& wb, const Act* const* x, int64_t b, int p,
                                      int half, int32x4_t (&t)[R][kHalfVecs]) {
    const int c = 2 * p + (kHigh ? 1 : 0);
    int32x4_t s[R][kHalfVecs];
    for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = vdupq_n_s32(0);
    for (int kq = 0; kq < 2; ++kq) {
      int8x16_t xv[R];
      for (int r = 0; r < R; ++r) xv[r] = vld1q_s8(x[r][b].qs + 32 * c + 16 * kq);
      const int k = 4 * kq;
      step<R, 0, kHigh>(wb.qs[p][k + 0][kHalfRows * half], xv, s);
      step<R, 1, kHigh>(wb.qs[p][k + 1][kHalfRows * half], xv, s);
      step<R, 2, kHigh>(wb.qs[p][k + 2][kHalfRows * half], xv, s);
      step<R, 3, kHigh>(wb.qs[p][k + 3][kHalfRows * half], xv, s);
    }
    int32x4_t sc[kHalfVecs];
    widen_u8x8(wb.scales[c] + kHalfRows * half, sc);
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < kHalfVecs; ++i) t[r][i] = vmlaq_s32(t[r][i], s[r][i], sc[i]);
    }
  }

  // y[r * y_stride + j] for j < 16, r < R: 16 rows of weights (nb super-blocks) against R
  // activation rows.
  template <int R>
  static void group(const Block* w, int64_t nb, const Act* const* x, float* y, int64_t y_stride) {
    float32x4_t acc[R][4], accm[R][4];
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) acc[r][j] = accm[r][j] = vdupq_n_f32(0.0f);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const Block& wb = w[b];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        int32x4_t t[R][kHalfVecs];
        for (int r = 0; r < R; ++r) t[r][0] = t[r][1] = vdupq_n_s32(0);
        for (int p = 0; p < 4; ++p) {
          sub_block<R, false>(wb, x, b, p, half, t);
          sub_block<R, true>(wb, x, b, p, half, t);
        }
        // The mins: M = sum_c m[c] * sums32[c], one (row, pair) product per 32-bit lane, then
        // pairwise adds give one lane per row.
        int16x8_t mins[4][2];  // [pair][rows 0-3, 4-7]: m[2p], m[2p + 1] of each row
        for (int p = 0; p < 4; ++p) {
          const uint8x16_t m = vld1q_u8(wb.mins[p][kHalfRows * half]);
          mins[p][0] = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(m)));
          mins[p][1] = vreinterpretq_s16_u16(vmovl_high_u8(m));
        }
        float32x4_t d[kHalfVecs], dmin[kHalfVecs];
        for (int i = 0; i < kHalfVecs; ++i) {
          d[i] = load_f16x4(wb.d + kHalfRows * half + 4 * i);
          dmin[i] = load_f16x4(wb.dmin + kHalfRows * half + 4 * i);
        }
        for (int r = 0; r < R; ++r) {
          int32x4_t mp[4];  // rows (0, 1), (2, 3), (4, 5), (6, 7): lanes m[2p] * S, m[2p + 1] * S
          for (int q = 0; q < 4; ++q) mp[q] = vdupq_n_s32(0);
          for (int p = 0; p < 4; ++p) {
            int32_t pair;
            std::memcpy(&pair, x[r][b].sums32 + 2 * p, sizeof(pair));
            const int16x8_t sp = vreinterpretq_s16_s32(vdupq_n_s32(pair));
            mp[0] = vmlal_s16(mp[0], vget_low_s16(mins[p][0]), vget_low_s16(sp));
            mp[1] = vmlal_high_s16(mp[1], mins[p][0], sp);
            mp[2] = vmlal_s16(mp[2], vget_low_s16(mins[p][1]), vget_low_s16(sp));
            mp[3] = vmlal_high_s16(mp[3], mins[p][1], sp);
          }
          const int32x4_t m[kHalfVecs] = {vpaddq_s32(mp[0], mp[1]), vpaddq_s32(mp[2], mp[3])};
          const float32x4_t dx = vdupq_n_f32(x[r][b].d);
          for (int i = 0; i < kHalfVecs; ++i) {
            float32x4_t& a = acc[r][kHalfVecs * half + i];
            float32x4_t& am = accm[r][kHalfVecs * half + i];
            a = vfmaq_f32(a, vmulq_f32(d[i], dx), vcvtq_f32_s32(t[r][i]));
            am = vfmaq_f32(am, vmulq_f32(dmin[i], dx), vcvtq_f32_s32(m[i]));
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j)
        vst1q_f32(y + r * y_stride + 4 * j, vsubq_f32(acc[r][j], accm[r][j]));
    }
  }
};

struct Q6K {
  using Block = BlockQ6KX16;
  using Act = ActK;
  static constexpr int kBlockElements = kQK_K;
  static constexpr auto packed_row_bytes = k_packed_row_bytes;

  template <int R>
  static void group(const Block* w, int64_t nb, const Act* const* x, float* y, int64_t y_stride) {
    const uint8x16_t m6 = vdupq_n_u8(0x3F);
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) acc[r][j] = vdupq_n_f32(0.0f);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const Block& wb = w[b];
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half) {
        int32x4_t t[R][kHalfVecs];
        for (int r = 0; r < R; ++r) t[r][0] = t[r][1] = vdupq_n_s32(0);
        for (int s = 0; s < 16; ++s) {
          // Planes 0-2 hold the codes of elements 4v + t in bits 0-5; the code of element 12 + t
          // is bits 6-7 of planes 0, 1, 2 as its bits 0-1, 2-3, 4-5: two shift-right-and-inserts
          // gather them in the top byte nibble, one shift puts them in place.
          int8x16_t v[4][kHalfVecs];
          for (int i = 0; i < kHalfVecs; ++i) {
            const uint8x16_t r0 = vld1q_u8(wb.q[s][0][kHalfRows * half] + 16 * i);
            const uint8x16_t r1 = vld1q_u8(wb.q[s][1][kHalfRows * half] + 16 * i);
            const uint8x16_t r2 = vld1q_u8(wb.q[s][2][kHalfRows * half] + 16 * i);
            v[0][i] = vreinterpretq_s8_u8(vandq_u8(r0, m6));
            v[1][i] = vreinterpretq_s8_u8(vandq_u8(r1, m6));
            v[2][i] = vreinterpretq_s8_u8(vandq_u8(r2, m6));
            v[3][i] = vreinterpretq_s8_u8(vshrq_n_u8(vsriq_n_u8(vsriq_n_u8(r2, r1, 2), r0, 4), 2));
          }
          int32x4_t sc[kHalfVecs];
          widen_s8x8(wb.scales[s] + kHalfRows * half, sc);
          int8x16_t xv[R];
          int32x4_t sum[R][kHalfVecs];
          for (int r = 0; r < R; ++r) {
            xv[r] = vld1q_s8(x[r][b].qs + 16 * s);
            sum[r][0] = sum[r][1] = vdupq_n_s32(x[r][b].q6_start[s]);
          }
          sdot_lane<R, 0>(sum, v[0], xv);
          sdot_lane<R, 1>(sum, v[1], xv);
          sdot_lane<R, 2>(sum, v[2], xv);
          sdot_lane<R, 3>(sum, v[3], xv);
          for (int r = 0; r < R; ++r) {
            for (int i = 0; i < kHalfVecs; ++i) t[r][i] = vmlaq_s32(t[r][i], sum[r][i], sc[i]);
          }
        }
        for (int r = 0; r < R; ++r) {
          const float32x4_t dx = vdupq_n_f32(x[r][b].d);
          for (int i = 0; i < kHalfVecs; ++i) {
            const float32x4_t d = vld1q_f32(wb.d + kHalfRows * half + 4 * i);
            float32x4_t& a = acc[r][kHalfVecs * half + i];
            a = vfmaq_f32(a, vmulq_f32(d, dx), vcvtq_f32_s32(t[r][i]));
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) vst1q_f32(y + r * y_stride + 4 * j, acc[r][j]);
    }
  }
};

// --- Q8_0 --------------------------------------------------------------------------------------

// Two Q8_0 blocks of a packed activation row: the quants and the scales as floats.
struct ActQ80 {
  int8_t qs[64];
  float d[2];
};
static_assert(sizeof(ActQ80) == 72);

int64_t q8_0_packed_row_bytes(int64_t n_in) {
  return round_up_64(n_in / 64 * static_cast<int64_t>(sizeof(ActQ80)));
}

void q8_0_pack_row(const float* x, void* dst, int64_t n_in) {
  ActQ80* a = static_cast<ActQ80*>(dst);
  for (int64_t b = 0; b < n_in / kQK; ++b) {
    BlockQ8_0 q;
    quantize_activation_row(GgmlType::Q8_0, x + b * kQK, &q, kQK);
    ActQ80& out = a[b / 2];
    const int h = static_cast<int>(b % 2);
    std::memcpy(out.qs + kQK * h, q.qs, kQK);
    out.d[h] = vgetq_lane_f32(vcvt_f32_f16(vreinterpret_f16_u16(vdup_n_u16(q.d))), 0);
  }
}

struct Q80 {
  using Block = BlockQ80X16;
  using Act = ActQ80;
  static constexpr int kBlockElements = 64;
  static constexpr auto packed_row_bytes = q8_0_packed_row_bytes;

  // Lane L of the activation vectors against codes qs[h][4 kq + L] of this half (stored + 128:
  // flipping the top bit gives the signed code back).
  template <int R, int L>
  static PONDER_INLINE void step(const uint8_t* q, const int8x16_t (&xv)[R],
                                 int32x4_t (&s)[R][kHalfVecs]) {
    int8x16_t w[kHalfVecs];
    for (int i = 0; i < kHalfVecs; ++i)
      w[i] = vreinterpretq_s8_u8(veorq_u8(vld1q_u8(q + 16 * i), vdupq_n_u8(0x80)));
    sdot_lane<R, L>(s, w, xv);
  }

  template <int R>
  static void group(const Block* w, int64_t nb, const Act* const* x, float* y, int64_t y_stride) {
    float32x4_t acc[R][4];
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) acc[r][j] = vdupq_n_f32(0.0f);
    }
    for (int64_t b = 0; b < nb; ++b) {
      const Block& wb = w[b];
      for (int h = 0; h < 2; ++h) {  // blocks 2b, 2b + 1, in order: each is one fma per row
#pragma GCC unroll 2
        for (int half = 0; half < 2; ++half) {
          int32x4_t s[R][kHalfVecs];
          for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = vdupq_n_s32(0);
          for (int kq = 0; kq < 2; ++kq) {
            int8x16_t xv[R];
            for (int r = 0; r < R; ++r) xv[r] = vld1q_s8(x[r][b].qs + kQK * h + 16 * kq);
            const int k = 4 * kq;
            step<R, 0>(wb.qs[h][k + 0][kHalfRows * half], xv, s);
            step<R, 1>(wb.qs[h][k + 1][kHalfRows * half], xv, s);
            step<R, 2>(wb.qs[h][k + 2][kHalfRows * half], xv, s);
            step<R, 3>(wb.qs[h][k + 3][kHalfRows * half], xv, s);
          }
          for (int r = 0; r < R; ++r) {
            const float32x4_t dx = vdupq_n_f32(x[r][b].d[h]);
            for (int i = 0; i < kHalfVecs; ++i) {
              const float32x4_t d = load_f16x4(wb.d[h] + kHalfRows * half + 4 * i);
              float32x4_t& a = acc[r][kHalfVecs * half + i];
              a = vfmaq_f32(a, vmulq_f32(d, dx), vcvtq_f32_s32(s[r][i]));
            }
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int j = 0; j < 4; ++j) vst1q_f32(y + r * y_stride + 4 * j, acc[r][j]);
    }
  }
};

// --- driver ------------------------------------------------------------------------------------

// Activation rows per pass over a group's weights.
constexpr int kRows = 4;

template <class K>
void gemm_x16(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin, int64_t o_end,
              float* y, int64_t y_stride) {
  using Block = typename K::Block;
  using Act = typename K::Act;
  const int64_t nb = w.n_in / K::kBlockElements;
  const int64_t x_row_bytes = K::packed_row_bytes(w.n_in);
  const Block* blocks = static_cast<const Block*>(w.x16);
  const uint8_t* x = static_cast<const uint8_t*>(xp);
  for (int64_t g = o_begin / kX16Rows; g < o_end / kX16Rows; ++g) {
    const Block* wg = blocks + g * nb;
    float* yg = y + g * kX16Rows;
    for (int64_t r = 0; r < n_rows; r += kRows) {
      const int rr = static_cast<int>(n_rows - r < kRows ? n_rows - r : kRows);
      const Act* rows[kRows];
      for (int i = 0; i < rr; ++i)
        rows[i] = reinterpret_cast<const Act*>(x + (r + i) * x_row_bytes);
      float* yr = yg + r * y_stride;
      switch (rr) {
        case 4:
          K::template group<4>(wg, nb, rows, yr, y_stride);
          break;
        case 3:
          K::template group<3>(wg, nb, rows, yr, y_stride);
          break;
        case 2:
          K::template group<2>(wg, nb, rows, yr, y_stride);
          break;
        default:
          K::template group<1>(wg, nb, rows, yr, y_stride);
          break;
      }
    }
  }
}

constexpr MatmulKernel kKernels[] = {
    {GgmlType::Q4_K, Isa::kNeon, "q4_K_x16_neon", k_packed_row_bytes, k_pack_row, gemm_x16<Q4K>,
     true},
    {GgmlType::Q6_K, Isa::kNeon, "q6_K_x16_neon", k_packed_row_bytes, k_pack_row, gemm_x16<Q6K>,
     true},
    {GgmlType::Q8_0, Isa::kNeon, "q8_0_x16_neon", q8_0_packed_row_bytes, q8_0_pack_row,
     gemm_x16<Q80>, true},
};

}  // namespace

const MatmulKernel* neon_x16_matmul_kernel(GgmlType type) {
  for (const MatmulKernel& k : kKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

}  // namespace ponder
