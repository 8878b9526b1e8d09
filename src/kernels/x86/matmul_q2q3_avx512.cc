// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels for Q2_K and Q3_K weights, bitwise equal to the
// scalar reference (dot_q2_K / dot_q3_K of dot_ggml_order.cc) and to x86/matmul_q2q3_avx2.cc. The
// integer work runs 512 bits wide and exactly: vpmaddubsw makes 16-bit sums of two products of two
// chunks of 32 elements at once, vpdpwssd adds scale * two of those into each 32-bit lane, and the
// two 256-bit halves are summed before the float step, which is the reference's (8 float lanes,
// one fused multiply-add per lane and super-block, Q2_K's min term first).
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
#include "kernels/x86/block_tile.h"
#include "kernels/x86/kquant_act.h"
#include "kernels/x86/q2q3_blocks.h"
#include "kernels/x86/tile_driver.h"

// The 2-bit codes of vector v = 2h + j (chunks c = 2v and 2v + 1, i.e. k = 2j and 2j + 1 of
// half h): bits 2k..2k+1 of qs[32h + e], the lower 256 bits for k = 2j, the upper ones 2j + 1.
__m512i two_bit_codes(const uint8_t* qs, int v) {
  const int h = v / 2, j = v % 2;
  const __m512i q = _mm512_broadcast_i64x4(load256(qs + 32 * h));
  const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(4 * j)),
                                           _mm256_set1_epi16(static_cast<int16_t>(4 * j + 2)), 1);
  return _mm512_and_si512(_mm512_srlv_epi16(q, shift), _mm512_set1_epi8(3));
}

// --- Q2_K ------------------------------------------------------------------------------------

// One super-block of a packed activation row.
using ActQ2K = ActBsums<64>;

struct Q2K : BlockTiled<Q2K, ActQ2K, BlockQ2_K, kQK_K, 6> {
  // Reference (dot_q2_K): acc[l] += (-dx * dmin) * (mins . bsums)[l], then acc[l] += (dx * d) *
  // lane l, lane l = sum over the 8 chunks of scale * (the 4 products at 4l..4l+3).
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    const __m128i m4 = _mm_set1_epi8(0x0F);
    prefetch_block(wb + kPrefetchBlocks);
    const __m128i raw = load128(wb->scales);
    const __m256i scales2 = _mm256_broadcastsi128_si256(_mm_and_si128(raw, m4));
    const float wd = half_to_float(wb->d);
    add_q2k_min_term<R>(wb, xa, acc);
    __m512i q[4], s[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      q[v] = two_bit_codes(wb->qs, v);
      s[v] = vector_scales(scales2, v);
    }
    // maddubs: 16-bit sums of 2 products (<= 2 * 3 * 128).
    add_super_block<R, false>(q, s, wd, xa, acc);
  }
};

// --- Q3_K ------------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants and scale, and for each pair of
// quants 4 * their sum, which turns maddubs with the unsigned codes q (0..7) into products with
// the weights q - 4.
using ActQ3K = ActPairSums<64, 4>;

struct Q3K : BlockTiled<Q3K, ActQ3K, BlockQ3_K, kQK_K, 6> {
  // Reference (dot_q3_K): lane l = sum over the 8 chunks of scale * (the 4 products of q - 4 and
  // x at 4l..4l+3); acc[l] += (dx * d) * lane l. Bit 2 of the code of element 32c + e is bit c
  // of hmask[e].
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    prefetch_block(wb + kPrefetchBlocks);
    const __m256i scales2 = _mm256_broadcastsi128_si256(q3_scales(wb->scales));
    const __m512i hmask = _mm512_broadcast_i64x4(load256(wb->hmask));
    __m512i q[4], s[4];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i bit =
          _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * v))),
                             _mm256_set1_epi8(static_cast<char>(1 << (2 * v + 1))), 1);
      const __m512i low = two_bit_codes(wb->qs, v);
      q[v] = _mm512_mask_add_epi8(low, _mm512_test_epi8_mask(hmask, bit), low, _mm512_set1_epi8(4));
      s[v] = vector_scales(scales2, v);
    }
    // maddubs: 16-bit sums of 2 products q * x (<= 2 * 7 * 128), minus 4 * (x + x').
    add_super_block<R, true>(q, s, half_to_float(wb->d), xa, acc);
  }
};

constexpr MatmulKernel kKernels[] = {make_kernel<Q2K>(GgmlType::Q2_K, "q2_K_avx512"),
                                     make_kernel<Q3K>(GgmlType::Q3_K, "q3_K_avx512")};

}  // namespace

const MatmulKernel* avx512_q2q3_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
