// AVX2 + FMA + F16C matmul kernels for the legacy 32-element block types Q4_0, Q4_1, Q5_0 and
// Q5_1. Each output gets the float operations of its reference row dot (dot_ggml_order.cc) in the
// same order, so results are bitwise equal to the scalar reference for every batch size; only the
// exact integer sums are computed differently.
//  - Q4_0 (the repacked q4_0_8x8 order: one float accumulator per output, one fused multiply-add
//    per block): eight weight rows share a register, one per 32-bit lane. Their blocks are
//    transposed on the fly so that vector k holds byte group k of all eight rows; maddubs with the
//    activation group broadcast to every lane then leaves each row's whole block sum in its lane,
//    with no horizontal sums, and the per-block fma runs on eight outputs at once.
//  - Q4_1 / Q5_0 / Q5_1 (llama.cpp's AVX2 vec_dot order: 8 float lanes per output, lane l the sum
//    of products 4l..4l+3 of each block): one block of 32 quants per register, as the reference.
// Packed activations carry what the integer steps need, computed once per row (the sums that undo
// the unsigned weight codes: Q4_0 8 * sum(q), Q5_0 16 * group sums). Compiled with -mavx2 -mfma
// -mf16c; see x86/tile_driver.h for why nothing here is inline-shared.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/matmul_legacy_pack.h"
#include "kernels/x86/tile_driver.h"

// The weight rows are read as several interleaved streams (8 rows for Q4_0), which the hardware
// prefetchers follow poorly: each kernel asks for the block kPrefetchBlocks ahead in every row
// (every second block, 36-48 bytes apart, so no cache line is skipped).
constexpr int64_t kPrefetchBlocks = 64;
void prefetch_ahead(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }

// The four bytes at p in every 32-bit lane.
__m256i broadcast32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// The 32 quants of a 4-bit block in element order: low nibbles (elements 0..15), then high ones.
__m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i q = load128(qs);
  return _mm256_and_si256(
      _mm256_inserti128_si256(_mm256_castsi128_si256(q), _mm_srli_epi16(q, 4), 1),
      _mm256_set1_epi8(0x0F));
}

// 0x10 in byte j where bit j of the little-endian qh is set (bit 4 of the Q5 quant j).
__m256i unpack_high_bits(const uint8_t* qh) {
  int32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits), _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2,
                                                2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201);
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// --- Q4_0 ------------------------------------------------------------------------------------

// A packed activation row: the quants of all blocks (32 bytes each), their scales as floats, and
// 8 * the sum of each block's quants (maddubs multiplies the unsigned codes q; the weights are
// q - 8).
struct Q40 {
  static constexpr int kR = 8;        // activation rows per tile
  static constexpr int kOBlock = 64;  // weight rows kept in L2 while the activation tiles pass
  static int64_t packed_row_bytes(int64_t n_in) { return round_up_64(n_in / kQK * (kQK + 8)); }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    const int64_t nb = n_in / kQK;
    int8_t* qs = static_cast<int8_t*>(dst);
    float* d = reinterpret_cast<float*>(qs + nb * kQK);
    int32_t* off = reinterpret_cast<int32_t*>(d + nb);
    for (int64_t b = 0; b < nb; ++b) {
      LegacyActBlock a;
      quantize_legacy_block_avx2(x + b * kQK, &a);
      std::memcpy(qs + b * kQK, a.qs, kQK);
      d[b] = a.d;
      off[b] = 8 * a.sum;
    }
  }

  // Reference (dot_q4_0): acc = fma(float(exact block sum), dw * dx, acc) over the blocks. Lane i
  // of every vector belongs to weight row i of the group (rows >= n_valid repeat the last one and
  // are not stored); y[r * y_stride + i] for r < R.
  template <int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int n_valid, int64_t nb, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    int32_t row_off[8];
    for (int i = 0; i < 8; ++i)
      row_off[i] = static_cast<int32_t>((i < n_valid ? i : n_valid - 1) * w_row_bytes);
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
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      xq[r] = reinterpret_cast<const int8_t*>(x + r * x_row_bytes);
      xd[r] = reinterpret_cast<const float*>(xq[r] + nb * kQK);
      xoff[r] = reinterpret_cast<const int32_t*>(xd[r] + nb);
      acc[r] = _mm256_setzero_ps();
    }
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
      __m256i sum16[R];
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i lo = _mm256_and_si256(t[k], m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(t[k], 4), m4);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          // 16-bit sums of 2 products (<= 2 * 15 * 127); 8 of them stay below 2^15.
          const __m256i p =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo, broadcast32(xq[r] + b * kQK + 4 * k)),
                               _mm256_maddubs_epi16(hi, broadcast32(xq[r] + b * kQK + 16 + 4 * k)));
          sum16[r] = k == 0 ? p : _mm256_add_epi16(sum16[r], p);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i sum =
            _mm256_sub_epi32(_mm256_madd_epi16(sum16[r], ones), _mm256_set1_epi32(xoff[r][b]));
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

  template <int R = kR>
  static void dispatch(int rr, const uint8_t* w, int64_t w_row_bytes, int n_valid, int64_t nb,
                       const uint8_t* x, int64_t x_row_bytes, float* y, int64_t y_stride) {
    if (rr == R) {
      tile<R>(w, w_row_bytes, n_valid, nb, x, x_row_bytes, y, y_stride);
      return;
    }
    if constexpr (R > 1)
      dispatch<R - 1>(rr, w, w_row_bytes, n_valid, nb, x, x_row_bytes, y, y_stride);
  }

  static void gemm(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                   int64_t o_end, float* y, int64_t y_stride) {
    const int64_t nb = w.n_in / kQK;
    const int64_t row_bytes = nb * static_cast<int64_t>(sizeof(BlockQ4_0));
    const int64_t x_row_bytes = packed_row_bytes(w.n_in);
    const uint8_t* wd = static_cast<const uint8_t*>(w.data);
    const uint8_t* x = static_cast<const uint8_t*>(xp);
    for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
      const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
      for (int64_t r = 0; r < n_rows; r += kR) {
        const int rr = static_cast<int>(n_rows - r < kR ? n_rows - r : kR);
        for (int64_t o = ob; o < oe; o += 8) {
          const int n_valid = static_cast<int>(oe - o < 8 ? oe - o : 8);
          dispatch(rr, wd + o * row_bytes, row_bytes, n_valid, nb, x + r * x_row_bytes, x_row_bytes,
                   y + r * y_stride + o, y_stride);
        }
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
};
static_assert(sizeof(ActQ81) == 40);

// Reference (dot_q4_1 / dot_q5_1): lane l = the 4 products at 4l..4l+3 of the unsigned quants;
// acc[l] = fma(dw * dx, lane, acc[l]); summs = fma(m, s, summs); result hsum8(acc) + summs.
template <class Block, bool kFive>
struct Q81Family {
  static constexpr int kW = 1, kR = 8;
  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kQK * static_cast<int64_t>(sizeof(ActQ81)));
  }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    ActQ81* a = static_cast<ActQ81*>(dst);
    for (int64_t b = 0; b < n_in / kQK; ++b) {
      LegacyActBlock q;
      quantize_legacy_block_avx2(x + b * kQK, &q);
      std::memcpy(a[b].qs, q.qs, kQK);
      a[b].d = q.d;
      a[b].s = q.s;
    }
  }

  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[W][R];
    __m128 summs[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[i][r] = _mm256_setzero_ps();
        summs[i][r] = _mm_setzero_ps();
      }
    }
    for (int64_t b = 0; b < n_in / kQK; ++b) {
      const ActQ81* xa[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xa[r] = reinterpret_cast<const ActQ81*>(x + r * x_row_bytes) + b;
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const Block* wb = reinterpret_cast<const Block*>(w + i * w_row_bytes) + b;
        if ((b & 1) == 0) prefetch_ahead(wb + kPrefetchBlocks);
        __m256i q = unpack_nibbles(wb->qs);
        if constexpr (kFive) q = _mm256_or_si256(q, unpack_high_bits(wb->qh));
        const float wd = half_to_float(wb->d);
        const __m128 wm = _mm_set_ss(half_to_float(wb->m));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          summs[i][r] = _mm_fmadd_ss(wm, _mm_set_ss(xa[r]->s), summs[i][r]);
          const __m256i lanes =
              _mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(xa[r]->qs)), ones);
          acc[i][r] =
              _mm256_fmadd_ps(_mm256_set1_ps(wd * xa[r]->d), _mm256_cvtepi32_ps(lanes), acc[i][r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        y[r * y_stride + i] = hsum8(acc[i][r]) + _mm_cvtss_f32(summs[i][r]);
    }
  }

  static void gemm(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                   int64_t o_end, float* y, int64_t y_stride) {
    const int64_t row_bytes = w.n_in / kQK * static_cast<int64_t>(sizeof(Block));
    gemm_tiled<Q81Family>(static_cast<const uint8_t*>(w.data), row_bytes, w.n_in, xp, n_rows,
                          o_begin, o_end, y, y_stride);
  }
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
};
static_assert(sizeof(ActQ50) == 68);

// Reference (dot_q5_0): lane l = the 4 products at 4l..4l+3 of (q - 16) and x;
// acc[l] = fma(dw * dx, lane, acc[l]); result hsum8(acc).
struct Q50 {
  static constexpr int kW = 1, kR = 8;
  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kQK * static_cast<int64_t>(sizeof(ActQ50)));
  }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    ActQ50* a = static_cast<ActQ50*>(dst);
    for (int64_t b = 0; b < n_in / kQK; ++b) {
      LegacyActBlock q;
      quantize_legacy_block_avx2(x + b * kQK, &q);
      std::memcpy(a[b].qs, q.qs, kQK);
      for (int g = 0; g < 8; ++g) a[b].offs[g] = 16 * q.group_sums[g];
      a[b].d = q.d;
    }
  }

  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / kQK; ++b) {
      const ActQ50* xa[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xa[r] = reinterpret_cast<const ActQ50*>(x + r * x_row_bytes) + b;
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const BlockQ5_0* wb = reinterpret_cast<const BlockQ5_0*>(w + i * w_row_bytes) + b;
        if ((b & 1) == 0) prefetch_ahead(wb + kPrefetchBlocks);
        const __m256i q = _mm256_or_si256(unpack_nibbles(wb->qs), unpack_high_bits(wb->qh));
        const float wd = half_to_float(wb->d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          // maddubs: 16-bit sums of 2 products q * x (<= 2 * 31 * 127).
          const __m256i lanes =
              _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(q, load256(xa[r]->qs)), ones),
                               load256(xa[r]->offs));
          acc[i][r] =
              _mm256_fmadd_ps(_mm256_set1_ps(wd * xa[r]->d), _mm256_cvtepi32_ps(lanes), acc[i][r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r * y_stride + i] = hsum8(acc[i][r]);
    }
  }

  static void gemm(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                   int64_t o_end, float* y, int64_t y_stride) {
    const int64_t row_bytes = w.n_in / kQK * static_cast<int64_t>(sizeof(BlockQ5_0));
    gemm_tiled<Q50>(static_cast<const uint8_t*>(w.data), row_bytes, w.n_in, xp, n_rows, o_begin,
                    o_end, y, y_stride);
  }
};

template <class K>
constexpr MatmulKernel make_kernel(GgmlType type, const char* name) {
  return {type, Isa::kAvx2, name, K::packed_row_bytes, K::pack_row, K::gemm};
}

constexpr MatmulKernel kKernels[] = {
    make_kernel<Q40>(GgmlType::Q4_0, "q4_0_avx2"),
    make_kernel<Q41>(GgmlType::Q4_1, "q4_1_avx2"),
    make_kernel<Q50>(GgmlType::Q5_0, "q5_0_avx2"),
    make_kernel<Q51>(GgmlType::Q5_1, "q5_1_avx2"),
};

}  // namespace

const MatmulKernel* avx2_legacy_matmul_kernel(GgmlType type) {
  for (const MatmulKernel& k : kKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

}  // namespace ponder
