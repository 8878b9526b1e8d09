// What the AVX2 and AVX-512 Q2_K / Q3_K kernels (x86/matmul_q2q3_avx2.cc,
// x86/matmul_q2q3_avx512.cc) do alike with a weight block: the prefetch ahead in its row, Q2_K's
// min term (the reference's first float step of a block) and Q3_K's scales as bytes. Included only
// inside the anonymous namespace of those translation units, after x86/avx2_basics.h (see
// x86/tile_driver.h for why nothing is shared inline); depends on quant/blocks.h, <immintrin.h> and
// <cstring> included by the including file (outside the namespace).
#pragma once

// A single weight row is one stream; asking for the super-block a few ahead (two lines, as a
// block is 84 or 110 bytes) keeps it flowing from DRAM.
constexpr int64_t kPrefetchBlocks = 4;
void prefetch_block(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
  _mm_prefetch(static_cast<const char*>(p) + 64, _MM_HINT_T1);
}

// Reference (dot_q2_K): acc[r][l] += (-dx * dmin) * (mins . bsums)[l], with the mins the high
// nibbles of the scale bytes and bsums Act's 16 sums of 16 activation quants.
template <int R, class Act>
void add_q2k_min_term(const BlockQ2_K* wb, const Act* const (&xa)[R], __m256 (&acc)[R]) {
  const __m128i raw = load128(wb->scales);
  const __m256i mins =
      _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F)));
  const float wmin = half_to_float(wb->dmin);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float dmin = -xa[r]->d * wmin;
    const __m256i prod = _mm256_madd_epi16(mins, load256(xa[r]->bsums));
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc[r]);
  }
}

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
