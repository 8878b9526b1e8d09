// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels for the legacy block types Q4_0, Q4_1, Q5_0 and Q5_1.
// The integer work uses vpdpbusd (u8 weight codes x s8 activations, four products per 32-bit lane,
// started from the sums that undo the codes' offsets); every output then gets its reference row
// dot's float operations in the reference's order (dot_ggml_order.cc), so results are bitwise equal
// to the scalar reference and to the AVX2 kernels of x86/matmul_legacy_avx2.cc.
//  - Q4_0 (one float accumulator per output, one fused multiply-add per block): sixteen weight rows
//    share a register, one per 32-bit lane, their blocks transposed on the fly (see the AVX2 file);
//    eight vpdpbusd with broadcast activation groups leave each row's block sum in its lane.
//  - Q4_1 / Q5_0 / Q5_1 (8 float lanes per output): in batches two weight rows share each 512-bit
//    register, one per half, each half in the reference's 8-lane order (Q4_1 / Q5_1's scalar min
//    chains of the whole tile in one register per row pair); a single activation row takes one
//    weight row at a time in 256-bit registers, which streams from memory best.
// Measured against AVX2 on this CPU (x86/matmul_legacy_avx2.cc): batches 1.4-3x faster, single
// rows about the same to 1.3x.
// Compiled with AVX-512 flags; see x86/tile_driver.h for why nothing here is inline-shared.

// GCC 12's AVX-512 cast intrinsics (_mm512_castsi256_si512 ...) read a deliberately undefined
// register and then warn about it when inlined; the upper halves are always overwritten.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx512;  // of every kernel in this file

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/avx512_basics.h"
#include "kernels/x86/matmul_legacy_pack.h"
#include "kernels/x86/tile_driver.h"

// --- Q4_0 ------------------------------------------------------------------------------------

// A packed activation row: the quants of all blocks (32 bytes each), their scales as floats, and
// -8 * the sum of each block's quants (the start value of vpdpbusd on the unsigned codes q; the
// weights are q - 8).
struct Q40 : Q40ActRow<-8> {
  using Block = BlockQ4_0;
  static constexpr int kBlockElems = kQK;
  static constexpr int kGroupRows = 16;  // weight rows per tile, one per 32-bit lane
  static constexpr int kR = 8;           // activation rows per tile
  static constexpr int kOBlock = 64;     // weight rows kept in L2 while the activation tiles pass

  // Reference (dot_q4_0): acc = fma(float(exact block sum), dw * dx, acc) over the blocks. Lane i
  // of every vector belongs to weight row i of the group (rows >= n_valid repeat the last one and
  // are not stored); y[r * y_stride + i] for r < R.
  template <int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int n_valid, int64_t nb, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    int32_t row_off[16];
    group_row_offsets(n_valid, w_row_bytes, row_off);
    const __m512i gather_idx = _mm512_loadu_si512(row_off);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const int8_t* xq[R];
    const float* xd[R];
    const int32_t* xoff[R];
    rows<R>(x, x_row_bytes, nb, xq, xd, xoff);
    __m512 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ4_0));
      if ((b & 1) == 0) {
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          prefetch_ahead(blk + row_off[i] + kPrefetchBlocks * sizeof(BlockQ4_0));
      }
      // Rows l, l + 4, l + 8, l + 12 in the four 128-bit lanes of z[l], then a 4 x 4 transpose of
      // 32-bit groups per lane: t[k] lane i = bytes 4k..4k+3 of row i's qs (elements 4k..4k+3 in
      // the low nibbles, 16+4k..16+4k+3 in the high ones).
      __m512i z[4];
#pragma GCC unroll 4
      for (int l = 0; l < 4; ++l) {
        const __m256i lo =
            _mm256_inserti128_si256(_mm256_castsi128_si256(load128(blk + row_off[l] + 2)),
                                    load128(blk + row_off[l + 4] + 2), 1);
        const __m256i hi =
            _mm256_inserti128_si256(_mm256_castsi128_si256(load128(blk + row_off[l + 8] + 2)),
                                    load128(blk + row_off[l + 12] + 2), 1);
        z[l] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      }
      const __m512i u0 = _mm512_unpacklo_epi32(z[0], z[1]);
      const __m512i u1 = _mm512_unpackhi_epi32(z[0], z[1]);
      const __m512i u2 = _mm512_unpacklo_epi32(z[2], z[3]);
      const __m512i u3 = _mm512_unpackhi_epi32(z[2], z[3]);
      const __m512i t[4] = {_mm512_unpacklo_epi64(u0, u2), _mm512_unpackhi_epi64(u0, u2),
                            _mm512_unpacklo_epi64(u1, u3), _mm512_unpackhi_epi64(u1, u3)};
      const __m512 wd =
          _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_i32gather_epi32(gather_idx, blk, 1)));
      __m512i sum[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) sum[r] = _mm512_set1_epi32(xoff[r][b]);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m512i lo = _mm512_and_si512(t[k], m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(t[k], 4), m4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int8_t* xb = xq[r] + b * kQK;
          sum[r] = _mm512_dpbusd_epi32(sum[r], lo, _mm512_set1_epi32(load_i32(xb + 4 * k)));
          sum[r] = _mm512_dpbusd_epi32(sum[r], hi, _mm512_set1_epi32(load_i32(xb + 16 + 4 * k)));
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 d = _mm512_mul_ps(wd, _mm512_set1_ps(xd[r][b]));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum[r]), d, acc[r]);
      }
    }
    const __mmask16 store = static_cast<__mmask16>((1u << n_valid) - 1);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * y_stride, store, acc[r]);
  }
};

// --- Q4_1 / Q5_0 / Q5_1 ----------------------------------------------------------------------

// One block of a packed activation row: the quants, the start values of vpdpbusd (Q5_0:
// -16 * the sum of each group of 4, as its weights are q - 16; zero for Q4_1 / Q5_1) and the
// scales (Q8_1's s for Q4_1 / Q5_1).
struct alignas(64) ActLegacy {
  int8_t qs[kQK];
  int32_t offs[8];
};
static_assert(sizeof(ActLegacy) == 64);

// The quants of one block in element order (low nibbles, then high ones; Q5: bit 4 from qh).
template <class Block, bool kFive>
__m256i block_quants(const Block* b) {
  const __m128i q = load128(b->qs);
  __m256i v =
      _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
                       _mm256_set1_epi8(0x0F));
  if constexpr (kFive) {
    v = _mm256_mask_add_epi8(v, static_cast<__mmask32>(load_i32(b->qh)), v, _mm256_set1_epi8(0x10));
  }
  return v;
}

// The quants of blocks b0 (lower half) and b1 (upper half).
template <class Block, bool kFive>
__m512i block_quants_pair(const Block* b0, const Block* b1) {
  const __m256i ab =
      _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b0->qs)), load128(b1->qs), 1);
  // [a | b | a >> 4 | b >> 4] -> [a | a >> 4 | b | b >> 4]
  const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(ab), _mm256_srli_epi16(ab, 4), 1);
  __m512i v =
      _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
  if constexpr (kFive) {
    const uint64_t bits = static_cast<uint32_t>(load_i32(b0->qh)) |
                          static_cast<uint64_t>(static_cast<uint32_t>(load_i32(b1->qh))) << 32;
    v = _mm512_mask_add_epi8(v, static_cast<__mmask64>(bits), v, _mm512_set1_epi8(0x10));
  }
  return v;
}

// Reference (dot_q5_0, dot_q4_1, dot_q5_1): lane l = the 4 products at 4l..4l+3 of the block;
// acc[l] = fma(dw * dx, lane, acc[l]); Q4_1 / Q5_1 also summs = fma(m, s, summs) and add it to
// hsum8(acc) at the end.
template <class BlockT, bool kFive, bool kMin>
struct LegacyFamily {
  using Block = BlockT;
  static constexpr int kBlockElems = kQK;
  static constexpr int kW = 4, kR = 8;
  // nb blocks, then nb float scales, then (kMin) nb float s.
  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kQK * (static_cast<int64_t>(sizeof(ActLegacy)) + (kMin ? 8 : 4)));
  }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    const int64_t nb = n_in / kQK;
    ActLegacy* a = static_cast<ActLegacy*>(dst);
    float* d = reinterpret_cast<float*>(a + nb);
    for (int64_t b = 0; b < nb; ++b) {
      LegacyActBlock q;
      quantize_legacy_block_avx2(x + b * kQK, &q);
      std::memcpy(a[b].qs, q.qs, kQK);
      for (int g = 0; g < 8; ++g) a[b].offs[g] = kMin ? 0 : -16 * q.group_sums[g];
      d[b] = q.d;
      if constexpr (kMin) d[nb + b] = q.s;
    }
  }

  static float min_of(const Block* b) {
    if constexpr (kMin) {
      return half_to_float(b->m);
    } else {
      return 0.0f;
    }
  }

  // W weight rows, one 256-bit register each (a single activation row, remainders).
  template <int W, int R>
  static void tile_rows(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                        int64_t x_row_bytes, float* y, int64_t y_stride) {
    const int64_t nb = n_in / kQK;
    __m256 acc[W][R] = {};
    __m128 summs[W][R] = {};
    for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const Block* wb = reinterpret_cast<const Block*>(w + i * w_row_bytes) + b;
        if ((b & 1) == 0) prefetch_ahead(wb + kPrefetchBlocks);
        const __m256i q = block_quants<Block, kFive>(wb);
        const float wd = half_to_float(wb->d);
        const __m128 wm = _mm_set_ss(min_of(wb));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const ActLegacy* xa = reinterpret_cast<const ActLegacy*>(x + r * x_row_bytes);
          const float* xd = reinterpret_cast<const float*>(xa + nb);
          if constexpr (kMin) summs[i][r] = _mm_fmadd_ss(wm, _mm_set_ss(xd[nb + b]), summs[i][r]);
          const __m256i lanes = _mm256_dpbusd_epi32(load256(xa[b].offs), q, load256(xa[b].qs));
          acc[i][r] =
              _mm256_fmadd_ps(_mm256_set1_ps(wd * xd[b]), _mm256_cvtepi32_ps(lanes), acc[i][r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float v = hsum8(acc[i][r]);
        y[r * y_stride + i] = kMin ? v + _mm_cvtss_f32(summs[i][r]) : v;
      }
    }
  }

  // Weight rows 2p and 2p + 1 of the tile share a 512-bit register, one per half. Q4_1 / Q5_1's
  // min terms of the whole tile run in one register per pair too: lane 8h + r of msum[p] is
  // summs of weight row 2p + h and activation row r (R <= 8).
  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    if constexpr (W == 1 || R == 1) {
      tile_rows<W, R>(w, w_row_bytes, n_in, x, x_row_bytes, y, y_stride);
      return;
    }
    static_assert(R <= 8);
    constexpr int P = (W + 1) / 2;  // row pairs; for odd W the last pair repeats its row
    const int64_t nb = n_in / kQK;
    __m512 acc[P][R];
    __m512 msum[P];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      msum[p] = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
    }
    const float* xs[8];  // Q8_1's s of each activation row (rows >= R repeat the last one)
#pragma GCC unroll 8
    for (int r = 0; r < 8; ++r) {
      xs[r] = reinterpret_cast<const float*>(
                  reinterpret_cast<const ActLegacy*>(x + (r < R ? r : R - 1) * x_row_bytes) + nb) +
              nb;
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512i wq[P];
      __m512 wd[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const Block *w0, *w1;
        row_pair_blocks<Block, W>(w, w_row_bytes, p, b, &w0, &w1);
        wq[p] = block_quants_pair<Block, kFive>(w0, w1);
        wd[p] = _mm512_insertf32x8(_mm512_set1_ps(half_to_float(w0->d)),
                                   _mm256_set1_ps(half_to_float(w1->d)), 1);
      }
      if constexpr (kMin) {
        const __m256 s8 = _mm256_setr_ps(xs[0][b], xs[1][b], xs[2][b], xs[3][b], xs[4][b], xs[5][b],
                                         xs[6][b], xs[7][b]);
        const __m512 s16 = _mm512_insertf32x8(_mm512_castps256_ps512(s8), s8, 1);
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const Block *w0, *w1;
          row_pair_blocks<Block, W>(w, w_row_bytes, p, b, &w0, &w1);
          const __m512 m =
              _mm512_insertf32x8(_mm512_set1_ps(min_of(w0)), _mm256_set1_ps(min_of(w1)), 1);
          msum[p] = _mm512_fmadd_ps(m, s16, msum[p]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const ActLegacy* xa = reinterpret_cast<const ActLegacy*>(x + r * x_row_bytes);
        const float* xd = reinterpret_cast<const float*>(xa + nb);
        const __m512i xq = _mm512_broadcast_i64x4(load256(xa[b].qs));
        const __m512i off = _mm512_broadcast_i64x4(load256(xa[b].offs));
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const __m512i lanes = _mm512_dpbusd_epi32(off, wq[p], xq);
          const __m512 d = _mm512_mul_ps(wd[p], _mm512_set1_ps(xd[b]));
          acc[p][r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[p][r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
      alignas(64) float m[16];
      _mm512_store_ps(m, msum[p]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float y0 = hsum8(_mm512_castps512_ps256(acc[p][r]));
        y[r * y_stride + 2 * p] = kMin ? y0 + m[r] : y0;
        if (2 * p + 1 < W) {
          const float y1 = hsum8(_mm512_extractf32x8_ps(acc[p][r], 1));
          y[r * y_stride + 2 * p + 1] = kMin ? y1 + m[8 + r] : y1;
        }
      }
    }
  }
};

using Q41 = LegacyFamily<BlockQ4_1, false, true>;
using Q50 = LegacyFamily<BlockQ5_0, true, false>;
using Q51 = LegacyFamily<BlockQ5_1, true, true>;

constexpr MatmulKernel kKernels[] = {make_kernel<Q40>(GgmlType::Q4_0, "q4_0_avx512"),
                                     make_kernel<Q41>(GgmlType::Q4_1, "q4_1_avx512"),
                                     make_kernel<Q50>(GgmlType::Q5_0, "q5_0_avx512"),
                                     make_kernel<Q51>(GgmlType::Q5_1, "q5_1_avx512")};

}  // namespace

const MatmulKernel* avx512_legacy_matmul_kernel(GgmlType type) {
  return find_kernel(kKernels, type);
}

}  // namespace ponder
