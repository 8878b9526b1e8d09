// The packed activation blocks (one per super-block of 256) that the AVX2 and AVX-512 row-major
// K-quant kernels (x86/matmul_avx2.cc, x86/matmul_avx512.cc, x86/matmul_q2q3_*.cc) lay out alike,
// and how each block is packed. Each ISA aligns them to its vector width (kAlign), which only
// changes the padding. Included only inside the anonymous namespace of those translation units (see
// x86/tile_driver.h for why nothing is shared inline); depends on x86/q8_quantize_avx2.h, and on
// quant/blocks.h and <cstring> included by the including file (outside the namespace).
#pragma once

#include "kernels/x86/q8_quantize_avx2.h"

// Q8_K quants, their sums of 16 (Q2_K's mins) and scale.
template <int kAlign>
struct alignas(kAlign) ActBsums {
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
  float d;

  static void pack(const float* x, ActBsums* a) {
    quantize_block_q8_K_avx2(x, &a->d, a->qs, a->bsums);
  }
};

// Q8_K quants and scale, and kOff * (q[2i] + q[2i + 1]) for each pair, which turns maddubs with
// unsigned weight codes q into products with q - kOff (Q3_K: 4, Q6_K: 32).
template <int kAlign, int kOff>
struct alignas(kAlign) ActPairSums {
  int8_t qs[kQK_K];
  int16_t offs[kQK_K / 2];
  float d;

  static void pack(const float* x, ActPairSums* a) {
    int16_t bsums[kQK_K / 16];
    quantize_block_q8_K_avx2(x, &a->d, a->qs, bsums);
    for (int i = 0; i < kQK_K / 2; ++i)
      a->offs[i] = static_cast<int16_t>(kOff * (a->qs[2 * i] + a->qs[2 * i + 1]));
  }
};

// Q8_K quants and scale, and the sums of the 8 sub-blocks of 32 (bsums[2k] + bsums[2k + 1]) that
// Q4_K's min term needs. The quants are in element order, or (kSwapMiddle) with chunks of 32 1
// and 2 of each half swapped: lo(g) = elements 128g + [0, 32) and 128g + 64 + [0, 32), hi(g) =
// 128g + 32 + [0, 32) and 128g + 96 + [0, 32), as the AVX-512 kernel's nibble vectors hold them.
template <int kAlign, bool kSwapMiddle>
struct alignas(kAlign) ActSums32 {
  int8_t qs[kQK_K];
  float d;
  int16_t sums[8];

  static void pack(const float* x, ActSums32* a) {
    BlockQ8_K q;
    quantize_block_q8_K_avx2(x, &q.d, q.qs, q.bsums);
    if constexpr (kSwapMiddle) {
      for (int g = 0; g < 2; ++g) {
        std::memcpy(a->qs + 128 * g, q.qs + 128 * g, 32);
        std::memcpy(a->qs + 128 * g + 32, q.qs + 128 * g + 64, 32);
        std::memcpy(a->qs + 128 * g + 64, q.qs + 128 * g + 32, 32);
        std::memcpy(a->qs + 128 * g + 96, q.qs + 128 * g + 96, 32);
      }
    } else {
      std::memcpy(a->qs, q.qs, kQK_K);
    }
    a->d = q.d;
    for (int k = 0; k < 8; ++k)
      a->sums[k] = static_cast<int16_t>(q.bsums[2 * k] + q.bsums[2 * k + 1]);
  }
};

// The sizes the kernels' packed rows are made of (padding to kAlign included).
static_assert(sizeof(ActSums32<32, false>) == 288 && sizeof(ActSums32<64, true>) == 320);
static_assert(sizeof(ActPairSums<32, 32>) == 544 && sizeof(ActPairSums<64, 32>) == 576);
static_assert(sizeof(ActPairSums<32, 4>) == 544 && sizeof(ActPairSums<64, 4>) == 576);
static_assert(sizeof(ActBsums<32>) == 320 && sizeof(ActBsums<64>) == 320);
