// AVX2 versions of the activation quantizers of dot_ggml_order.cc (quantize_activation_row), bit
// for bit: the same amax, the same scale arithmetic, q = round-to-nearest-even of the same float
// product. Included only inside the anonymous namespace of the per-ISA translation units (see
// x86/tile_driver.h for why), which are compiled with at least -mavx2 -mfma -mf16c.
#pragma once

// Expects <immintrin.h>, <cstdint> and <cstring> to be included by the including file (outside
// the namespace).

// Q8_K (quantize_q8_K of the reference): max = the element of largest magnitude (the first one on
// ties), iscale = -127 / max, q = min(127, round_even(iscale * x)), d = 1 / iscale,
// bsums = sums of 16 quants; an all-zero block is all zeros.
inline void quantize_block_q8_K_avx2(const float* x, float* d_out, int8_t* qs, int16_t* bsums) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 vmax = _mm256_setzero_ps();
  for (int j = 0; j < 256; j += 8)
    vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign_mask, _mm256_loadu_ps(x + j)));
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  if (amax == 0.0f) {
    *d_out = 0.0f;
    std::memset(qs, 0, 256);
    std::memset(bsums, 0, 16 * sizeof(int16_t));
    return;
  }
  float max = 0.0f;
  const __m256 va = _mm256_set1_ps(amax);
  for (int j = 0; j < 256; j += 8) {
    const int hit = _mm256_movemask_ps(
        _mm256_cmp_ps(_mm256_andnot_ps(sign_mask, _mm256_loadu_ps(x + j)), va, _CMP_EQ_OQ));
    if (hit != 0) {
      max = x[j + __builtin_ctz(static_cast<unsigned>(hit))];
      break;
    }
  }
  const float iscale = -127.0f / max;
  const __m256 vs = _mm256_set1_ps(iscale);
  const __m256i v127 = _mm256_set1_epi32(127);
  const __m256i ones = _mm256_set1_epi16(1);
  for (int j = 0; j < 256; j += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(vs, _mm256_loadu_ps(x + j + 8 * k))),
                              v127);
    }
    // packs interleave 128-bit lanes; the permute restores element order.
    const __m256i q01 = _mm256_packs_epi32(q[0], q[1]);
    const __m256i q23 = _mm256_packs_epi32(q[2], q[3]);
    __m256i q8 = _mm256_packs_epi16(q01, q23);
    q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + j), q8);
    // Sums of 16: lane l of p32 sums elements 4l..4l+3; two hadds leave lanes 0..3 + lanes 4..7.
    const __m256i p32 = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), ones);
    const __m256i h = _mm256_hadd_epi32(p32, p32);
    const __m256i h2 = _mm256_hadd_epi32(h, h);
    bsums[j / 16] = static_cast<int16_t>(_mm256_cvtsi256_si32(h2));
    bsums[j / 16 + 1] = static_cast<int16_t>(_mm256_extract_epi32(h2, 4));
  }
  *d_out = 1.0f / iscale;
}

// The quants of one block of 32 as quantize_q8_legacy of the reference rounds them: amax of the
// block, d = amax / 127 (returned unrounded in *d_out), id = 127 / amax (0 for an all-zero block),
// q = round_even(x * id) (always within -127..127), in element order.
inline __m256i q8_0_quants_avx2(const float* x, float* d_out) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  __m256 v[4];
  __m256 vmax = _mm256_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_loadu_ps(x + 8 * k);
    vmax = _mm256_max_ps(vmax, _mm256_andnot_ps(sign_mask, v[k]));
  }
  __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(vmax, 1), _mm256_castps256_ps128(vmax));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  const float amax = _mm_cvtss_f32(m4);
  *d_out = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
  const __m256i q8 =
      _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  return _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Q8_0 (quantize_q8_legacy of the reference): the quants above and d stored as f16.
inline void quantize_block_q8_0_avx2(const float* x, uint16_t* d_out, int8_t* qs) {
  float d;
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), q8_0_quants_avx2(x, &d));
  *d_out = static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT));
}
