// The float operations of one x86 vector width, for the code written once for every width
// (kernels/ggml_exp.h): F32xN<8> is __m256 (AVX2 + FMA), F32xN<16> is __m512 (AVX-512F). A
// template, so a translation unit compiled for AVX2 only never instantiates the AVX-512 branches.
// Included only inside the anonymous namespace of the per-ISA translation units (see
// x86/tile_driver.h for why nothing is shared inline across ISAs); depends on <immintrin.h>,
// included by the including file.
#pragma once

template <int kLanes>
struct F32xN {
  static_assert(kLanes == 8 || kLanes == 16);
  static constexpr bool k8 = kLanes == 8;
  static constexpr int kWidth = kLanes;
  // __m256 or __m512 (std::conditional_t would drop their vector attributes).
  using F = decltype([] {
    if constexpr (k8) return _mm256_setzero_ps();
    if constexpr (!k8) return _mm512_setzero_ps();
  }());

  static F set1(float v) {
    if constexpr (k8) return _mm256_set1_ps(v);
    if constexpr (!k8) return _mm512_set1_ps(v);
  }
  static F fma(F a, F b, F c) {  // a * b + c, fused
    if constexpr (k8) return _mm256_fmadd_ps(a, b, c);
    if constexpr (!k8) return _mm512_fmadd_ps(a, b, c);
  }
  static F fnma(F a, F b, F c) {  // c - a * b, fused
    if constexpr (k8) return _mm256_fnmadd_ps(a, b, c);
    if constexpr (!k8) return _mm512_fnmadd_ps(a, b, c);
  }
  // The plain operations as GCC's vector extensions, the instructions the intrinsics emit at
  // either width (the project compiles with -ffp-contract=off, so none is fused).
  static F mul(F a, F b) { return a * b; }
  static F sub(F a, F b) { return a - b; }
  static F add(F a, F b) { return a + b; }
  static F div(F a, F b) { return a / b; }
  static F loadu(const float* p) {
    if constexpr (k8) return _mm256_loadu_ps(p);
    if constexpr (!k8) return _mm512_loadu_ps(p);
  }
  static void storeu(float* p, F a) {
    if constexpr (k8) _mm256_storeu_ps(p, a);
    if constexpr (!k8) _mm512_storeu_ps(p, a);
  }
};
