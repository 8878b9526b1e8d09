// The activation quantizer of the legacy-type kernels (x86/matmul_legacy_*.cc): one block of 32
// floats rounded exactly as quantize_activation_row of dot_ggml_order.cc rounds it to Q8_0 or Q8_1
// (amax, d = amax / 127 stored as f16, q = round-to-nearest-even of x * (127 / amax), Q8_1's
// s = f16(d * sum(q)) with the unrounded d), plus the integer sums of the quants the kernels fold
// into their start values. Included only inside the anonymous namespace of those translation units
// (compiled with at least -mavx2 -mfma -mf16c; see x86/tile_driver.h for why nothing is shared
// inline across ISAs). Depends on nothing else.
#pragma once

// Expects <immintrin.h> and <cstdint> to be included by the including file (outside the namespace).

struct LegacyActBlock {
  int8_t qs[32];
  int32_t group_sums[8];  // group_sums[l] = qs[4l] + ... + qs[4l + 3]
  int32_t sum;            // all 32 quants
  float d;                // f16(amax / 127), widened: the scale the dot multiplies by
  float s;                // Q8_1's f16(amax / 127 * sum), widened
};

inline void quantize_legacy_block_avx2(const float* x, LegacyActBlock* out) {
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
  const float d = amax / 127.0f;
  const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
  out->d = _cvtsh_ss(static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT)));
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int k = 0; k < 4; ++k) q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
  __m256i q8 = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  q8 = _mm256_permutevar8x32_epi32(q8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->qs), q8);
  const __m256i groups =
      _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), q8), _mm256_set1_epi16(1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->group_sums), groups);
  __m128i s4 = _mm_add_epi32(_mm256_extracti128_si256(groups, 1), _mm256_castsi256_si128(groups));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
  out->sum = _mm_cvtsi128_si32(s4);
  const float s = d * static_cast<float>(out->sum);
  out->s = _cvtsh_ss(static_cast<uint16_t>(_cvtss_sh(s, _MM_FROUND_TO_NEAREST_INT)));
}
