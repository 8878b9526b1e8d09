// pshufb masks that spread a K-quant block's byte scales over the lanes their elements take, as
// constexpr tables, shared by the kernels of both ISAs that lay their chunks out alike
// (x86/matmul_avx2.cc, x86/matmul_avx512.cc, x86/matmul_q2q3_*.cc), and the AVX2 step that
// applies the chunk one. Included only inside the anonymous namespace of those translation units
// (see x86/tile_driver.h for why nothing is shared inline); depends on <immintrin.h> and
// <cstdint>, included by the including file.
#pragma once

template <int kN, int kBytes>
struct ByteTable {
  alignas(64) uint8_t m[kN][kBytes];
};

// m[v][i] = byte(v, i).
template <int kN, int kBytes, class F>
constexpr ByteTable<kN, kBytes> make_byte_table(F byte) {
  ByteTable<kN, kBytes> t{};
  for (int v = 0; v < kN; ++v) {
    for (int i = 0; i < kBytes; ++i) t.m[v][i] = static_cast<uint8_t>(byte(v, i));
  }
  return t;
}

// Scale 2c to bytes 0..7 and scale 2c + 1 to bytes 8..15 of 16 byte scales: chunk c of 32
// elements (128h + 32k + e with c = 4h + k) has sub-blocks 2c (e < 16) and 2c + 1 (Q3_K, Q6_K
// on AVX2).
constexpr auto kScalePairShuffle =
    make_byte_table<8, 16>([](int c, int i) { return 2 * c + i / 8; });

// On the 16 byte scales broadcast to both 128-bit lanes: the 32 bytes of vector v (elements
// 64v + [0, 64), chunks 2v and 2v + 1, two elements per 16-bit lane once widened) get their
// sub-block's scale, 4v + byte / 8 (Q3_K, Q6_K on AVX-512).
constexpr auto kScaleQuadShuffle =
    make_byte_table<4, 32>([](int v, int i) { return 4 * v + i / 8; });

// The 16-bit scales of chunk c (16 lanes) from 16 byte scales.
inline __m256i chunk_scales(__m128i scales, int c) {
  return _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
      scales, _mm_load_si128(reinterpret_cast<const __m128i*>(kScalePairShuffle.m[c]))));
}
