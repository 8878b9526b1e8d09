// The header of a Q4_K block decoded in registers, shared by the x86 kernels: its first 16 bytes
// are d, dmin and the 12 bytes of packed six-bit scales and mins (blocks.h). Included only inside
// the anonymous namespace of the per-ISA translation units (see x86/tile_driver.h for why); needs
// SSE4.1 + F16C and <immintrin.h> included before. Also the min term of a Q4_K block (row-major
// kernels, x86/matmul_avx2.cc and x86/matmul_avx512.cc), which both ISAs compute alike.
#pragma once

struct K4Header {
  __m128i scales_mins;  // bytes 0..7: the 8 scales, bytes 8..15: the 8 mins
  float d, dmin;
};

// s[k] is byte 4 + k of the first 16 bytes. Low parts: sc[j] = s[j] & 63 and m[j] = s[j + 4] & 63
// for j < 4, sc[j] = s[j + 4] & 15 and m[j] = s[j + 4] >> 4 for j >= 4; high parts of the latter
// (bits 4-5) are bits 6-7 of s[j - 4] and s[j].
inline K4Header decode_k4_header(const void* block) {
  const __m128i v = _mm_loadu_si128(static_cast<const __m128i*>(block));
  const __m128i low_src = _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m128i high_src =
      _mm_setr_epi8(-128, -128, -128, -128, 4, 5, 6, 7, -128, -128, -128, -128, 8, 9, 10, 11);
  const __m128i low_mask =
      _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15);
  const __m128i top_mins = _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1);
  const __m128i a = _mm_shuffle_epi8(v, low_src);
  const __m128i b = _mm_shuffle_epi8(v, high_src);
  const __m128i low = _mm_blendv_epi8(
      _mm_and_si128(a, low_mask), _mm_and_si128(_mm_srli_epi16(a, 4), _mm_set1_epi8(15)), top_mins);
  const __m128i high = _mm_and_si128(_mm_srli_epi16(b, 2), _mm_set1_epi8(0x30));
  const __m128 dd = _mm_cvtph_ps(v);
  return {_mm_or_si128(low, high), _mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd))};
}

// Reference (dot_q4_K): accm[r][p] += -dx * dmin * (m . sums)[p] over 4 lanes, where Act's sums
// holds the 8 sums of 32 activation quants (bsums[2k] + bsums[2k + 1]) and d the activation scale.
template <int R, class Act>
void add_k4_min_term(const K4Header& hdr, const Act* const (&xa)[R], __m128 (&accm)[R]) {
  const __m128i scm = hdr.scales_mins;
  const __m128i mins = _mm_cvtepu8_epi16(_mm_unpackhi_epi64(scm, scm));
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float dmin = -xa[r]->d * hdr.dmin;
    const __m128i prod =
        _mm_madd_epi16(mins, _mm_loadu_si128(reinterpret_cast<const __m128i*>(xa[r]->sums)));
    accm[r] = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), accm[r]);
  }
}
