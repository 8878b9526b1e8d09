// AVX-512 BF16 matmul kernel for BF16 weights: vdpbf16ps in dot_bf16's order (dot_ggml_order.cc:
// llamafile tinyBLAS's, for every batch size), so results are bitwise equal to the scalar
// reference. Per output: one accumulator of 16 lanes, one vdpbf16ps per 32 elements (the leftover
// pairs of a row with n_in % 32 != 0 loaded with zeros beyond the row), then reduce16 in float.
// Packed activations are the values rounded to bf16 exactly as quantize_activation_row does
// (round to nearest even, subnormals kept: not vcvtneps2bf16, which flushes them), so the packed
// row is byte for byte the reference's. Tiles of kW weight rows x kR activation rows keep kW kR
// accumulators in registers; a tile changes which outputs share loads, never an output's order.
// Compiled with AVX-512 F/BW/VL/DQ + BF16 flags; see x86/tile_driver.h for why nothing here is
// inline-shared.

// GCC 12's AVX-512 cast intrinsics read a deliberately undefined register and then warn about it
// when inlined (as in matmul_avx512.cc).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx512;  // of every kernel in this file

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/tile_driver.h"

// The same on 16 lanes.
__m256i bf16_round16(__m512 f) {
  const __m512i x = _mm512_castps_si512(f);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(x, 16), _mm512_set1_epi32(1));
  const __m512i bias = _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(x, bias), 16);
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(x, _mm512_set1_epi32(0x7fffffff)),
                                                _mm512_set1_epi32(0x7f800000));
  r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(x, 16), _mm512_set1_epi32(0x40));
  return _mm512_cvtepi32_epi16(r);
}

// _mm512_reduce_add_ps's order (reduce16 of the reference): upper + lower 8, then 4, then
// (a0 + a2) + (a1 + a3).
float reduce16(__m512 a) {
  const __m256 t8 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
  __m128 r = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

__m512bh load_bf16x32(const uint8_t* p) {
  return reinterpret_cast<__m512bh>(_mm512_loadu_si512(p));
}

// The first `count` (< 32) bf16 at p, zeros after them; reads nothing beyond them.
__m512bh load_bf16_partial(const uint8_t* p, int64_t count) {
  const __mmask32 m = static_cast<__mmask32>((uint64_t{1} << count) - 1);
  return reinterpret_cast<__m512bh>(_mm512_maskz_loadu_epi16(m, p));
}

struct Bf16 {
  using Block = uint16_t;
  static constexpr int kBlockElems = 1;
  // 4 x 6 = 24 accumulators + 4 weight vectors + 1 activation vector of the 32 registers; per 32
  // elements 10 loads feed 24 vdpbf16ps.
  static constexpr int kW = 4, kR = 6;
  static int64_t packed_row_bytes(int64_t n_in) { return round_up_64(n_in * 2); }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    uint16_t* out = static_cast<uint16_t*>(dst);
    int64_t i = 0;
    for (; i + 16 <= n_in; i += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                          bf16_round16(_mm512_loadu_ps(x + i)));
    }
    for (; i < n_in; ++i) out[i] = bf16_round(x[i]);
  }

  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const int64_t n32 = n_in & ~int64_t{31};
    __m512 acc[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[i][r] = _mm512_setzero_ps();
    }
    for (int64_t e = 0; e < n32; e += 32) {
      __m512bh wv[W];
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) wv[i] = load_bf16x32(w + i * w_row_bytes + 2 * e);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh xv = load_bf16x32(x + r * x_row_bytes + 2 * e);
#pragma GCC unroll 8
        for (int i = 0; i < W; ++i) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], wv[i], xv);
      }
    }
    if (n32 < n_in) {
      __m512bh wv[W];
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i)
        wv[i] = load_bf16_partial(w + i * w_row_bytes + 2 * n32, n_in - n32);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh xv = load_bf16_partial(x + r * x_row_bytes + 2 * n32, n_in - n32);
#pragma GCC unroll 8
        for (int i = 0; i < W; ++i) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], wv[i], xv);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r * y_stride + i] = reduce16(acc[i][r]);
    }
  }

  // A single activation row: kGemvW weight rows at a time (gemm_rows_gemv), so that several
  // outputs' dependency chains (one accumulator each, one vdpbf16ps step per 32 elements) are in
  // flight at once.
  static constexpr int kGemvW = 4;
};

constexpr MatmulKernel kKernels[] = {make_kernel<Bf16>(GgmlType::BF16, "bf16_avx512bf16")};

}  // namespace

const MatmulKernel* avx512bf16_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
