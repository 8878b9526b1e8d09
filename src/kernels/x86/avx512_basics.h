// Small AVX-512 helpers of the row-major matmul kernels (x86/matmul_avx512.cc,
// x86/matmul_q2q3_avx512.cc, x86/matmul_legacy_avx512.cc): folding a 512-bit integer sum to the
// reference's 8 lanes, the 16-bit scales of a 64-element vector (x86/scale_shuffles.h's quad
// mask), and the two weight blocks of a row pair that share a 512-bit register. Included only
// inside the anonymous namespace of those translation units (see x86/tile_driver.h for why
// nothing is shared inline); depends on <immintrin.h> and <cstdint>, included by the including
// file.
#pragma once

#include "kernels/x86/scale_shuffles.h"

// Lane l of the result = lane l + lane l + 8 of v (exact integers).
inline __m256i fold_halves(__m512i v) {
  return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

// The 16-bit scales of vector v = elements 64v + [0, 64) (two per 32-bit lane) from the 16 byte
// scales broadcast to both 128-bit lanes.
inline __m512i vector_scales(__m256i scales2, int v) {
  return _mm512_cvtepi8_epi16(_mm256_shuffle_epi8(
      scales2, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScaleQuadShuffle.m[v]))));
}

// Row pair p of a tile of W weight rows (rows 2p and 2p + 1; for odd W the last pair repeats
// its row): their blocks b, for the lower and upper halves of a 512-bit register.
template <class Block, int W>
void row_pair_blocks(const uint8_t* w, int64_t w_row_bytes, int p, int64_t b, const Block** w0,
                     const Block** w1) {
  const int i1 = 2 * p + 1 < W ? 2 * p + 1 : 2 * p;
  *w0 = reinterpret_cast<const Block*>(w + 2 * p * w_row_bytes) + b;
  *w1 = reinterpret_cast<const Block*>(w + i1 * w_row_bytes) + b;
}

// The integer and float steps of a K-quant super-block on AVX-512 (Q2_K, Q3_K, Q4_K, Q6_K), once
// its 4 vectors of codes q[v] (elements 64v + [0, 64)) and their 16-bit scales s[v] are unpacked:
// per activation row, vpmaddubsw makes 16-bit sums of 2 products (minus Act's offs where the codes
// carry an offset, kOffs), vpdpwssd adds scale * 2 of those into each 32-bit lane, the two halves
// are folded, and acc[r] += (dx * dw) * lanes: the reference's one fused multiply-add per lane.
template <int R, bool kOffs, class Act>
void add_super_block(const __m512i (&q)[4], const __m512i (&s)[4], float wd,
                     const Act* const (&xa)[R], __m256 (&acc)[R]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512i xq = _mm512_loadu_si512(xa[r]->qs + 64 * v);
      __m512i p = _mm512_maddubs_epi16(q[v], xq);
      if constexpr (kOffs) p = _mm512_sub_epi16(p, _mm512_loadu_si512(xa[r]->offs + 32 * v));
      sum = _mm512_dpwssd_epi32(sum, p, s[v]);
    }
    const float d = xa[r]->d * wd;
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(fold_halves(sum)), acc[r]);
  }
}
