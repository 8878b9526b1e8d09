// Small AVX2-level helpers every x86 matmul kernel file uses: rounding a packed row size up to
// 64 bytes, one f16 to f32 and one f32 to bf16, unaligned 32-bit and 128/256-bit loads, hsum4 and
// hsum_float_8 (llama.cpp's reduction of 8 float lanes, which the reference orders reproduce).
// Included only inside the anonymous namespace of the per-ISA translation units (x86/matmul_*.cc),
// so each gets its own copy compiled with its own target flags (x86/tile_driver.h says why nothing
// is shared inline).
#pragma once

// Expects <immintrin.h>, <cstdint> and <cstring> to be included by the including file (outside the
// namespace).

inline int64_t round_up_64(int64_t n) { return (n + 63) / 64 * 64; }

inline float half_to_float(uint16_t h) { return _cvtsh_ss(h); }

// fp32_to_bf16 of quant/half.h: round to nearest even on the 16 dropped bits, NaN made quiet.
inline uint16_t bf16_round(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// (a0 + a2) + (a1 + a3): the 4-lane sum of the reference (Q4_K's min lanes, reduce16's tail).
inline float hsum4(__m128 r) {
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// hsum_float_8 of the reference: upper half + lower half, then (r0 + r2) + (r1 + r3).
inline float hsum8(__m256 a) {
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(a, 1), _mm256_castps256_ps128(a));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

// The 4 bytes at p as one int32 (any alignment).
inline int32_t load_i32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline __m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
