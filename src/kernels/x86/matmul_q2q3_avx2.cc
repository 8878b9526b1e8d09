// AVX2 + FMA + F16C matmul kernels for Q2_K and Q3_K weights. Each output gets the float
// operations of its reference row dot (dot_q2_K / dot_q3_K of dot_ggml_order.cc: llama.cpp's AVX2
// vec_dot order, 8 float lanes, one fused multiply-add per lane and super-block, Q2_K's min term
// first) in the same order, so results are bitwise equal to the scalar reference for every batch
// size; only the exact integer sums are computed differently (maddubs / madd).
// Packed activations are Q8_K rows with what the integer steps need computed once per row: the
// bsums for Q2_K's mins, and for Q3_K the pair sums 4 * (x[2i] + x[2i+1]) that turn maddubs with
// the unsigned codes q (0..7) into products with the weights q - 4.
// Compiled with -mavx2 -mfma -mf16c; see x86/tile_driver.h for why nothing here is inline-shared.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/q8_quantize_avx2.h"
#include "kernels/x86/tile_driver.h"

// A single weight row is one stream; asking for the super-block a few ahead (two lines, as a
// block is 84 or 110 bytes) keeps it flowing from DRAM.
constexpr int64_t kPrefetchBlocks = 4;
void prefetch_block(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
  _mm_prefetch(static_cast<const char*>(p) + 64, _MM_HINT_T1);
}

// Byte shuffles taking scale 2c to bytes 0..7 and scale 2c + 1 to bytes 8..15: chunk c of 32
// elements (elements 128h + 32k + e with c = 4h + k) has sub-blocks 2c (e < 16) and 2c + 1.
struct ScalePairShuffle {
  alignas(16) uint8_t m[8][16];
};
constexpr ScalePairShuffle make_scale_pair_shuffle() {
  ScalePairShuffle t{};
  for (int c = 0; c < 8; ++c) {
    for (int i = 0; i < 16; ++i) t.m[c][i] = static_cast<uint8_t>(2 * c + i / 8);
  }
  return t;
}
constexpr ScalePairShuffle kScalePair = make_scale_pair_shuffle();

// The 16-bit scales of chunk c from 16 byte scales.
__m256i chunk_scales(__m128i scales, int c) {
  return _mm256_cvtepi8_epi16(
      _mm_shuffle_epi8(scales, _mm_load_si128(reinterpret_cast<const __m128i*>(kScalePair.m[c]))));
}

// --- Q2_K ------------------------------------------------------------------------------------

// One super-block of a packed activation row.
struct alignas(32) ActQ2K {
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
  float d;
};
static_assert(sizeof(ActQ2K) == 320);

struct Q2K {
  static constexpr int kW = 1, kR = 4;
  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kQK_K * static_cast<int64_t>(sizeof(ActQ2K)));
  }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    ActQ2K* a = static_cast<ActQ2K*>(dst);
    for (int64_t b = 0; b < n_in / kQK_K; ++b)
      quantize_block_q8_K_avx2(x + b * kQK_K, &a[b].d, a[b].qs, a[b].bsums);
  }

  // Reference (dot_q2_K): acc[l] += (-dx * dmin) * (mins . bsums)[l], then acc[l] += (dx * d) *
  // lane l, lane l = sum over the 8 chunks of scale * (the 4 products at 4l..4l+3).
  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m4 = _mm_set1_epi8(0x0F);
    __m256 acc[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / kQK_K; ++b) {
      const ActQ2K* xa[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xa[r] = reinterpret_cast<const ActQ2K*>(x + r * x_row_bytes) + b;
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const BlockQ2_K* wb = reinterpret_cast<const BlockQ2_K*>(w + i * w_row_bytes) + b;
        prefetch_block(wb + kPrefetchBlocks);
        const __m128i raw = load128(wb->scales);
        const __m128i scales = _mm_and_si128(raw, m4);
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), m4));
        const float wd = half_to_float(wb->d), wmin = half_to_float(wb->dmin);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float dmin = -xa[r]->d * wmin;
          const __m256i prod = _mm256_madd_epi16(mins, load256(xa[r]->bsums));
          acc[i][r] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc[i][r]);
        }
        __m256i sumi[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) sumi[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i q = load256(wb->qs + 32 * h);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const int c = 4 * h + k;
            const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
            const __m256i sc = chunk_scales(scales, c);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
              // maddubs: 16-bit sums of 2 products (<= 2 * 3 * 128); madd: scale * 2 of those.
              const __m256i p = _mm256_maddubs_epi16(q2, load256(xa[r]->qs + 32 * c));
              sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sc));
            }
          }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float d = xa[r]->d * wd;
          acc[i][r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[i][r]);
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
    const int64_t row_bytes = w.n_in / kQK_K * static_cast<int64_t>(sizeof(BlockQ2_K));
    gemm_tiled<Q2K>(static_cast<const uint8_t*>(w.data), row_bytes, w.n_in, xp, n_rows, o_begin,
                    o_end, y, y_stride);
  }
};

// --- Q3_K ------------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants and scale, and for each pair of
// quants 4 * their sum.
struct alignas(32) ActQ3K {
  int8_t qs[kQK_K];
  int16_t offs[kQK_K / 2];
  float d;
};
static_assert(sizeof(ActQ3K) == 544);

// The 16 signed six-bit scales (sc - 32) of a Q3_K block as bytes: low 4 bits from bytes 0..7
// (low nibbles for scales 0..7, high ones for 8..15), bits 4-5 of scale 4g + j from bits 2g, 2g+1
// of byte 8 + j.
__m128i q3_scales(const uint8_t* s) {
  uint64_t lo;
  uint32_t hi;
  std::memcpy(&lo, s, 8);
  std::memcpy(&hi, s + 8, 4);
  constexpr uint64_t k4 = 0x0F0F0F0F0F0F0F0FULL;
  constexpr uint32_t k2 = 0x03030303u;
  const __m128i low =
      _mm_set_epi64x(static_cast<int64_t>((lo >> 4) & k4), static_cast<int64_t>(lo & k4));
  const __m128i high =
      _mm_set_epi32(static_cast<int32_t>((hi >> 6) & k2), static_cast<int32_t>((hi >> 4) & k2),
                    static_cast<int32_t>((hi >> 2) & k2), static_cast<int32_t>(hi & k2));
  return _mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(high, 4)), _mm_set1_epi8(32));
}

// 4 in byte e where bit c of hmask[e] is set (bit 2 of the quant of element 32c + e).
__m256i q3_high_bits(__m256i hmask, int c) {
  const __m256i moved = c < 2 ? _mm256_slli_epi16(hmask, 2 - c) : _mm256_srli_epi16(hmask, c - 2);
  return _mm256_and_si256(moved, _mm256_set1_epi8(4));
}

struct Q3K {
  static constexpr int kW = 1, kR = 4;
  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kQK_K * static_cast<int64_t>(sizeof(ActQ3K)));
  }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    ActQ3K* a = static_cast<ActQ3K*>(dst);
    for (int64_t b = 0; b < n_in / kQK_K; ++b) {
      int16_t bsums[kQK_K / 16];
      quantize_block_q8_K_avx2(x + b * kQK_K, &a[b].d, a[b].qs, bsums);
      for (int i = 0; i < kQK_K / 2; ++i)
        a[b].offs[i] = static_cast<int16_t>(4 * (a[b].qs[2 * i] + a[b].qs[2 * i + 1]));
    }
  }

  // Reference (dot_q3_K): lane l = sum over the 8 chunks of scale * (the 4 products of q - 4 and
  // x at 4l..4l+3); acc[l] += (dx * d) * lane l.
  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < n_in / kQK_K; ++b) {
      const ActQ3K* xa[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xa[r] = reinterpret_cast<const ActQ3K*>(x + r * x_row_bytes) + b;
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const BlockQ3_K* wb = reinterpret_cast<const BlockQ3_K*>(w + i * w_row_bytes) + b;
        prefetch_block(wb + kPrefetchBlocks);
        const __m128i scales = q3_scales(wb->scales);
        const __m256i hmask = load256(wb->hmask);
        __m256i sumi[R];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) sumi[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {
          const __m256i q = load256(wb->qs + 32 * h);
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const int c = 4 * h + k;
            const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3),
                                               q3_high_bits(hmask, c));
            const __m256i sc = chunk_scales(scales, c);
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
              // maddubs: 16-bit sums of 2 products q * x (<= 2 * 7 * 128), minus 4 * (x + x').
              const __m256i p =
                  _mm256_sub_epi16(_mm256_maddubs_epi16(q3, load256(xa[r]->qs + 32 * c)),
                                   load256(xa[r]->offs + 16 * c));
              sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sc));
            }
          }
        }
        const float wd = half_to_float(wb->d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const float d = xa[r]->d * wd;
          acc[i][r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[i][r]);
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
    const int64_t row_bytes = w.n_in / kQK_K * static_cast<int64_t>(sizeof(BlockQ3_K));
    gemm_tiled<Q3K>(static_cast<const uint8_t*>(w.data), row_bytes, w.n_in, xp, n_rows, o_begin,
                    o_end, y, y_stride);
  }
};

template <class K>
constexpr MatmulKernel make_kernel(GgmlType type, const char* name) {
  return {type, Isa::kAvx2, name, K::packed_row_bytes, K::pack_row, K::gemm};
}

constexpr MatmulKernel kKernels[] = {
    make_kernel<Q2K>(GgmlType::Q2_K, "q2_K_avx2"),
    make_kernel<Q3K>(GgmlType::Q3_K, "q3_K_avx2"),
};

}  // namespace

const MatmulKernel* avx2_q2q3_matmul_kernel(GgmlType type) {
  for (const MatmulKernel& k : kKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

}  // namespace ponder
