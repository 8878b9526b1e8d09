// The 256-bit matmul kernels for Q2_K and Q3_K weights, compiled twice: for AVX2 + FMA + F16C
// and, again with -mavxvnni and PONDER_AVXVNNI=1 (src/kernels/CMakeLists.txt), for AVX-VNNI,
// where vpdpwssd scales and adds what vpmaddwd + vpaddd do on AVX2 (kVnni; the same integers).
// Each output gets the float operations of its reference row dot (dot_q2_K / dot_q3_K of
// dot_ggml_order.cc: llama.cpp's AVX2 vec_dot order, 8 float lanes, one fused multiply-add per
// lane and super-block, Q2_K's min term first) in the same order, so results are bitwise equal to
// the scalar reference for every batch size; only the exact integer sums are computed differently.
// Packed activations are Q8_K rows with what the integer steps need computed once per row: the
// bsums for Q2_K's mins, and for Q3_K the pair sums 4 * (x[2i] + x[2i+1]) that turn maddubs with
// the unsigned codes q (0..7) into products with the weights q - 4.
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
#include "kernels/x86/kquant_act.h"
#include "kernels/x86/q2q3_blocks.h"
#include "kernels/x86/scale_shuffles.h"
#include "kernels/x86/tile_driver.h"

// 4 in byte e where bit c of hmask[e] is set (bit 2 of the quant of element 32c + e).
__m256i q3_high_bits(__m256i hmask, int c) {
  const __m256i moved = c < 2 ? _mm256_slli_epi16(hmask, 2 - c) : _mm256_srli_epi16(hmask, c - 2);
  return _mm256_and_si256(moved, _mm256_set1_epi8(4));
}

// The exact sums of a block's 8 chunks of 32 (c = 4h + k: bits 2k..2k+1 of qs[32h, +32), plus
// with kHigh Q3_K's bit 2 from hmask), each times its scale, into 8 lanes per activation row:
// maddubs makes 16-bit sums of 2 products (minus Act's offs where the codes carry an offset),
// madd multiplies 2 of those by the chunk's scales.
template <int R, bool kHigh, class Act>
void chunk_sums(const uint8_t* qs, __m128i scales, __m256i hmask, const Act* const (&xa)[R],
                __m256i (&sumi)[R]) {
  const __m256i m3 = _mm256_set1_epi8(3);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) sumi[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    const __m256i q = load256(qs + 32 * h);
#pragma GCC unroll 4
    for (int k = 0; k < 4; ++k) {
      const int c = 4 * h + k;
      __m256i codes = _mm256_and_si256(_mm256_srli_epi16(q, 2 * k), m3);
      if constexpr (kHigh) codes = _mm256_or_si256(codes, q3_high_bits(hmask, c));
      const __m256i sc = chunk_scales(scales, c);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m256i p = _mm256_maddubs_epi16(codes, load256(xa[r]->qs + 32 * c));
        if constexpr (kHigh) p = _mm256_sub_epi16(p, load256(xa[r]->offs + 16 * c));
        if constexpr (kVnni) {
          sumi[r] = _mm256_dpwssd_avx_epi32(sumi[r], p, sc);
        } else {
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sc));
        }
      }
    }
  }
}

// --- Q2_K ------------------------------------------------------------------------------------

// One super-block of a packed activation row.
using ActQ2K = ActBsums<32>;

struct Q2K : BlockTiled<Q2K, ActQ2K, BlockQ2_K, kQK_K, 4> {
  // Reference (dot_q2_K): acc[l] += (-dx * dmin) * (mins . bsums)[l], then acc[l] += (dx * d) *
  // lane l, lane l = sum over the 8 chunks of scale * (the 4 products at 4l..4l+3).
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    prefetch_block(wb + kPrefetchBlocks);
    const __m128i raw = load128(wb->scales);
    const __m128i scales = _mm_and_si128(raw, m4);
    const float wd = half_to_float(wb->d);
    add_q2k_min_term<R>(wb, xa, acc);
    // maddubs: 16-bit sums of 2 products (<= 2 * 3 * 128).
    __m256i sumi[R];
    chunk_sums<R, false>(wb->qs, scales, _mm256_setzero_si256(), xa, sumi);
    add_scaled_sums<R>(wd, xa, sumi, acc);
  }
};

// --- Q3_K ------------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants and scale, and for each pair of
// quants 4 * their sum.
using ActQ3K = ActPairSums<32, 4>;

struct Q3K : BlockTiled<Q3K, ActQ3K, BlockQ3_K, kQK_K, 4> {
  // Reference (dot_q3_K): lane l = sum over the 8 chunks of scale * (the 4 products of q - 4 and
  // x at 4l..4l+3); acc[l] += (dx * d) * lane l.
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    prefetch_block(wb + kPrefetchBlocks);
    const __m128i scales = q3_scales(wb->scales);
    const __m256i hmask = load256(wb->hmask);
    // maddubs: 16-bit sums of 2 products q * x (<= 2 * 7 * 128), minus 4 * (x + x').
    __m256i sumi[R];
    chunk_sums<R, true>(wb->qs, scales, hmask, xa, sumi);
    const float wd = half_to_float(wb->d);
    add_scaled_sums<R>(wd, xa, sumi, acc);
  }
};

constexpr MatmulKernel kKernels[] = {
    make_kernel<Q2K>(GgmlType::Q2_K, kVnni ? "q2_K_avxvnni" : "q2_K_avx2"),
    make_kernel<Q3K>(GgmlType::Q3_K, kVnni ? "q3_K_avxvnni" : "q3_K_avx2")};

}  // namespace

const MatmulKernel* PONDER_YMM_ENTRY(q2q3)(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
