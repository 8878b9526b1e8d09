// The 256-bit matmul kernels for the legacy 32-element block types Q4_0, Q4_1, Q5_0 and Q5_1,
// compiled twice: for AVX2 + FMA + F16C and, again with -mavxvnni and PONDER_AVXVNNI=1
// (src/kernels/CMakeLists.txt), for AVX-VNNI, where vpdpbusd makes the exact integer sums that
// AVX2 gets from vpmaddubsw + vpmaddwd (kVnni; the same integers). Each output gets the float
// operations of its reference row dot (dot_ggml_order.cc) in the same order, so results are bitwise
// equal to the scalar reference for every batch size; only the exact integer sums are computed
// differently.
//  - Q4_0 (the repacked q4_0_8x8 order: one float accumulator per output, one fused multiply-add
//    per block): eight weight rows share a register, one per 32-bit lane. Their blocks are
//    transposed on the fly so that vector k holds byte group k of all eight rows; maddubs with the
//    activation group broadcast to every lane then leaves each row's whole block sum in its lane,
//    with no horizontal sums, and the per-block fma runs on eight outputs at once.
//  - Q4_1 / Q5_0 / Q5_1 (llama.cpp's AVX2 vec_dot order: 8 float lanes per output, lane l the sum
//    of products 4l..4l+3 of each block): one block of 32 quants per register, as the reference.
// Packed activations carry what the integer steps need, computed once per row (the sums that undo
// the unsigned weight codes: Q4_0 8 * sum(q), Q5_0 16 * group sums).
// See x86/tile_driver.h for why nothing here is inline-shared.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

// kIsa and kVnni, which the headers below use.
#include "kernels/x86/ymm_level.h"
// The steps shared with the other x86 kernels.
#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/block_tile.h"
#include "kernels/x86/matmul_legacy_pack.h"
#include "kernels/x86/tile_driver.h"

// Lane l: the exact sum of the 4 products q x at bytes 4l..4l+3 (q unsigned, x signed; AVX2: from
// vpmaddubsw's 16-bit sums of 2, which never saturate on these types' codes; ones: 16-bit 1s).
// A template so that the AVX2 object never instantiates the AVX-VNNI branch.
template <int kUnused = 0>
__m256i exact_lanes(__m256i q, __m256i x, __m256i ones) {
  if constexpr (kVnni) {
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), q, x);
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), ones);
  }
}

// The four bytes at p in every 32-bit lane.
__m256i broadcast32(const int8_t* p) { return _mm256_set1_epi32(load_i32(p)); }

// The 32 quants of a 4-bit block in element order: low nibbles (elements 0..15), then high ones.
__m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs);
  return _mm256_and_si256(
      _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
      _mm256_set1_epi8(0x0F));
}

// 0x10 in byte j where bit j of the little-endian qh is set (bit 4 of the Q5 quant j).
__m256i unpack_high_bits(const uint8_t* qh) {
  const __m256i spread =
      _mm256_shuffle_epi8(_mm256_set1_epi32(load_i32(qh)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2,
                                           2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// --- Q4_0 ------------------------------------------------------------------------------------

// A packed activation row: the quants of all blocks (32 bytes each), their scales as floats, and
// 8 * the sum of each block's quants (maddubs multiplies the unsigned codes q; the weights are
// q - 8).
struct Q40 : Q40ActRow<8> {
  using Block = BlockQ4_0;
  static constexpr int kBlockElems = kQK;
  static constexpr int kGroupRows = 8;  // weight rows per tile, one per 32-bit lane
  static constexpr int kR = 8;          // activation rows per tile
  static constexpr int kOBlock = 64;    // weight rows kept in L2 while the activation tiles pass

  // Reference (dot_q4_0): acc = fma(float(exact block sum), dw * dx, acc) over the blocks. Lane i
  // of every vector belongs to weight row i of the group (rows >= n_valid repeat the last one and
  // are not stored); y[r * y_stride + i] for r < R.
  template <int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int n_valid, int64_t nb, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    int32_t row_off[8];
    group_row_offsets(n_valid, w_row_bytes, row_off);
    const __m256i gather_idx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row_off));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    // Bytes 0-1 of each 32-bit lane to the low 8 bytes of each 128-bit half.
    const __m256i pick_d =
        _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, -1, -1, -1, -1, -1, -1, -1, -1, 0, 1, 4, 5, 8, 9,
                         12, 13, -1, -1, -1, -1, -1, -1, -1, -1);
    const int8_t* xq[R];
    const float* xd[R];
    const int32_t* xoff[R];
    rows<R>(x, x_row_bytes, nb, xq, xd, xoff);
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const uint8_t* blk = w + b * static_cast<int64_t>(sizeof(BlockQ4_0));
      if ((b & 1) == 0) {
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i)
          prefetch_ahead(blk + row_off[i] + kPrefetchBlocks * sizeof(BlockQ4_0));
      }
      // Rows i and i + 4 in the two halves, then a 4 x 4 transpose of 32-bit groups per half:
      // t[k] lane i = bytes 4k..4k+3 of row i's qs (elements 4k..4k+3 and 16+4k..16+4k+3).
      __m256i y4[4];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        y4[i] = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(blk + row_off[i] + 2)),
                                        load128(blk + row_off[i + 4] + 2), 1);
      }
      const __m256i u0 = _mm256_unpacklo_epi32(y4[0], y4[1]);
      const __m256i u1 = _mm256_unpackhi_epi32(y4[0], y4[1]);
      const __m256i u2 = _mm256_unpacklo_epi32(y4[2], y4[3]);
      const __m256i u3 = _mm256_unpackhi_epi32(y4[2], y4[3]);
      const __m256i t[4] = {_mm256_unpacklo_epi64(u0, u2), _mm256_unpackhi_epi64(u0, u2),
                            _mm256_unpacklo_epi64(u1, u3), _mm256_unpackhi_epi64(u1, u3)};
      const __m256i d16 = _mm256_permute4x64_epi64(
          _mm256_shuffle_epi8(
              _mm256_i32gather_epi32(reinterpret_cast<const int*>(blk), gather_idx, 1), pick_d),
          0x08);
      const __m256 wd = _mm256_cvtph_ps(_mm256_castsi256_si128(d16));
      __m256i sum16[R];  // int16 sums (set at k = 0), or with AVX-VNNI int32 sums from -xoff on
      if constexpr (kVnni) {
        for (int r = 0; r < R; ++r) sum16[r] = _mm256_set1_epi32(-xoff[r][b]);
      }
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i lo = _mm256_and_si256(t[k], m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(t[k], 4), m4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i x_lo = broadcast32(xq[r] + b * kQK + 4 * k);
          const __m256i x_hi = broadcast32(xq[r] + b * kQK + 16 + 4 * k);
          if constexpr (kVnni) {
            sum16[r] =
                _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(sum16[r], lo, x_lo), hi, x_hi);
            continue;
          }
          // 16-bit sums of 2 products (<= 2 * 15 * 127); 8 of them stay below 2^15.
          const __m256i p =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
          sum16[r] = k == 0 ? p : _mm256_add_epi16(sum16[r], p);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i sum = kVnni ? sum16[r]
                                  : _mm256_sub_epi32(_mm256_madd_epi16(sum16[r], ones),
                                                     _mm256_set1_epi32(xoff[r][b]));
        const __m256 d = _mm256_mul_ps(wd, _mm256_set1_ps(xd[r][b]));
        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (n_valid == 8) {
        _mm256_storeu_ps(y + r * y_stride, acc[r]);
      } else {
        alignas(32) float out[8];
        _mm256_store_ps(out, acc[r]);
        std::memcpy(y + r * y_stride, out, sizeof(float) * static_cast<size_t>(n_valid));
      }
    }
  }
};

// --- Q4_1 / Q5_1 -----------------------------------------------------------------------------

// One block of a packed Q8_1 activation row.
struct ActQ81 {
  int8_t qs[kQK];
  float d;
  float s;  // d * sum(q) as Q8_1 stores it

  static void pack(const float* x, ActQ81* a) {
    LegacyActBlock q;
    quantize_legacy_block_avx2(x, &q);
    std::memcpy(a->qs, q.qs, kQK);
    a->d = q.d;
    a->s = q.s;
  }
};
static_assert(sizeof(ActQ81) == 40);

// Reference (dot_q4_1 / dot_q5_1): lane l = the 4 products at 4l..4l+3 of the unsigned quants;
// acc[l] = fma(dw * dx, lane, acc[l]); summs = fma(m, s, summs); result hsum8(acc) + summs.
template <class Block, bool kFive>
struct Q81Family : BlockTiled<Q81Family<Block, kFive>, ActQ81, Block, kQK, 8> {
  template <int R>
  static void block(int64_t b, const Block* wb, const ActQ81* const (&xa)[R], __m256 (&acc)[R],
                    __m128 (&summs)[R]) {
    const __m256i ones = _mm256_set1_epi16(1);
    if ((b & 1) == 0) prefetch_ahead(wb + kPrefetchBlocks);
    __m256i q = unpack_nibbles(wb->qs);
    if constexpr (kFive) q = _mm256_or_si256(q, unpack_high_bits(wb->qh));
    const float wd = half_to_float(wb->d);
    const __m128 wm = _mm_set_ss(half_to_float(wb->m));
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      summs[r] = _mm_fmadd_ss(wm, _mm_set_ss(xa[r]->s), summs[r]);
      const __m256i lanes = exact_lanes(q, load256(xa[r]->qs), ones);
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xa[r]->d), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }

  static float finish(__m256 acc, __m128 summs) { return hsum8(acc) + _mm_cvtss_f32(summs); }
};

using Q41 = Q81Family<BlockQ4_1, false>;
using Q51 = Q81Family<BlockQ5_1, true>;

// --- Q5_0 ------------------------------------------------------------------------------------

// One block of a packed Q8_0 activation row for Q5_0: the quants, 16 * the sum of each group of
// 4 (maddubs multiplies the unsigned codes q; the weights are q - 16) and the scale.
struct ActQ50 {
  int8_t qs[kQK];
  int32_t offs[8];
  float d;

  static void pack(const float* x, ActQ50* a) {
    LegacyActBlock q;
    quantize_legacy_block_avx2(x, &q);
    std::memcpy(a->qs, q.qs, kQK);
    for (int g = 0; g < 8; ++g) a->offs[g] = 16 * q.group_sums[g];
    a->d = q.d;
  }
};
static_assert(sizeof(ActQ50) == 68);

// Reference (dot_q5_0): lane l = the 4 products at 4l..4l+3 of (q - 16) and x;
// acc[l] = fma(dw * dx, lane, acc[l]); result hsum8(acc).
struct Q50 : BlockTiled<Q50, ActQ50, BlockQ5_0, kQK, 8> {
  template <int R>
  static void block(int64_t b, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    const __m256i ones = _mm256_set1_epi16(1);
    if ((b & 1) == 0) prefetch_ahead(wb + kPrefetchBlocks);
    const __m256i q = _mm256_or_si256(unpack_nibbles(wb->qs), unpack_high_bits(wb->qh));
    const float wd = half_to_float(wb->d);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      // AVX2: 16-bit sums of 2 products q * x (<= 2 * 31 * 127) first.
      const __m256i lanes =
          _mm256_sub_epi32(exact_lanes(q, load256(xa[r]->qs), ones), load256(xa[r]->offs));
      acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xa[r]->d), _mm256_cvtepi32_ps(lanes), acc[r]);
    }
  }
};

constexpr MatmulKernel kKernels[] = {
    make_kernel<Q40>(GgmlType::Q4_0, kVnni ? "q4_0_avxvnni" : "q4_0_avx2"),
    make_kernel<Q41>(GgmlType::Q4_1, kVnni ? "q4_1_avxvnni" : "q4_1_avx2"),
    make_kernel<Q50>(GgmlType::Q5_0, kVnni ? "q5_0_avxvnni" : "q5_0_avx2"),
    make_kernel<Q51>(GgmlType::Q5_1, kVnni ? "q5_1_avxvnni" : "q5_1_avx2")};

}  // namespace

const MatmulKernel* PONDER_YMM_ENTRY(legacy)(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
