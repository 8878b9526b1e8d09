// AVX2 + FMA matmul kernel for BF16 weights on CPUs without AVX512_BF16: dot_bf16's order
// (dot_ggml_order.cc: one 16-lane vdpbf16ps accumulator per output over runs of 32, reduce16 in
// float) with each vdpbf16ps lane step emulated exactly, so results are bitwise equal to the
// scalar reference and to the AVX-512 BF16 kernel. A lane step is acc = ftz(fma(w[2j+1], x[2j+1],
// acc)), then acc = ftz(fma(w[2j], x[2j], acc)): bf16 x bf16 products are exact in fp32 and fma
// rounds once, as the instruction does; subnormal inputs are read as zero (DAZ) and subnormal
// results flushed to signed zero (FTZ). The 16-lane accumulator is two 256-bit halves here
// (lanes 0-7: elements [e, e + 16) of each run of 32, lanes 8-15: [e + 16, e + 32)).
// Packed activations: the values rounded to bf16 exactly as quantize_activation_row does, then,
// per 16 elements, the 8 odd-indexed ones and the 8 even-indexed ones as fp32 with DAZ applied
// (what the inner loop multiplies), zeros past the row up to a multiple of 32.
// Compiled with AVX2 + FMA flags; see x86/tile_driver.h for why nothing here is inline-shared.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx2;  // of every kernel in this file

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/tile_driver.h"

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

float bf16_value(uint16_t h) { return bits_to_float(static_cast<uint32_t>(h) << 16); }

// DAZ of one bf16: a subnormal reads as a zero of its sign.
float bf16_value_daz(uint16_t h) {
  return bf16_value((h & 0x7f80u) == 0 ? static_cast<uint16_t>(h & 0x8000u) : h);
}

// DAZ on 16 bf16 weights at once (both elements of each pair).
__m256i daz_bf16x16(__m256i w) {
  const __m256i zero_exp =
      _mm256_cmpeq_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f80)), _mm256_setzero_si256());
  return _mm256_andnot_si256(_mm256_and_si256(zero_exp, _mm256_set1_epi16(0x7fff)), w);
}

// FTZ: a result below the smallest normal in magnitude becomes a zero of its sign.
__m256 ftz(__m256 t) {
  const __m256 mag = _mm256_and_ps(t, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)));
  const __m256 tiny =
      _mm256_cmp_ps(mag, _mm256_castsi256_ps(_mm256_set1_epi32(0x00800000)), _CMP_LT_OQ);
  return _mm256_xor_ps(t, _mm256_and_ps(tiny, mag));
}

// reduce16 of the reference on a 16-lane accumulator held as lanes 0-7 (lo) and 8-15 (hi).
float reduce16(__m256 lo, __m256 hi) {
  const __m256 t8 = _mm256_add_ps(hi, lo);
  return hsum4(_mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8)));
}

struct Bf16Avx2 {
  using Block = uint16_t;
  static constexpr int kBlockElems = 1;
  // A pass keeps one 8-lane half per output live (see tile): 2 x 3 accumulators, 4 weight vectors
  // and the FTZ temporaries fit the 16 registers.
  static constexpr int kW = 2, kR = 3;
  static int64_t packed_row_bytes(int64_t n_in) { return round_up_64((n_in + 31) / 32 * 32 * 4); }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    float* out = static_cast<float*>(dst);
    const int64_t n32 = (n_in + 31) / 32 * 32;
    const auto value = [&](int64_t e) {
      return e < n_in ? bf16_value_daz(bf16_round(x[e])) : 0.0f;
    };
    for (int64_t c = 0; c < n32; c += 16) {
      for (int j = 0; j < 8; ++j) {
        out[c + j] = value(c + 2 * j + 1);
        out[c + 8 + j] = value(c + 2 * j);
      }
    }
  }

  // acc += the 8 pairs of weights wv (16 bf16, DAZ not yet applied) times activations xr (8 odd
  // then 8 even values, as packed), for W weight rows x R activation rows.
  template <int W, int R>
  static void step(const __m256i (&wv)[W], const uint8_t* x, int64_t x_row_bytes, int64_t c,
                   __m256 (&acc)[W][R]) {
    const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
    __m256 w_odd[W], w_even[W];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
      const __m256i v = daz_bf16x16(wv[i]);
      w_odd[i] = _mm256_castsi256_ps(_mm256_and_si256(v, hi_mask));
      w_even[i] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const float* xr = reinterpret_cast<const float*>(x + r * x_row_bytes) + c;
      const __m256 x_odd = _mm256_loadu_ps(xr);
      const __m256 x_even = _mm256_loadu_ps(xr + 8);
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const __m256 t = ftz(_mm256_fmadd_ps(w_odd[i], x_odd, acc[i][r]));
        acc[i][r] = ftz(_mm256_fmadd_ps(w_even[i], x_even, t));
      }
    }
  }

  // Pass q computes lanes 8q .. 8q + 7 of every output's accumulator (elements 16q .. 16q + 15 of
  // each run of 32); the passes touch disjoint lanes, so running them one after the other leaves
  // every lane's sequence of operations unchanged.
  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const int64_t n32 = n_in & ~int64_t{31};
    __m256 half[2][W][R];
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      __m256 acc[W][R];
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
      }
      for (int64_t c = 16 * q; c < n32; c += 32) {
        __m256i wv[W];
#pragma GCC unroll 8
        for (int i = 0; i < W; ++i) {
          wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + i * w_row_bytes + 2 * c));
        }
        step<W, R>(wv, x, x_row_bytes, c, acc);
      }
      if (n32 < n_in) {  // the leftover pairs, weights padded with zeros
        const int64_t c = n32 + 16 * q;
        __m256i wv[W];
#pragma GCC unroll 8
        for (int i = 0; i < W; ++i) {
          uint16_t part[16] = {};
          const uint16_t* wr = reinterpret_cast<const uint16_t*>(w + i * w_row_bytes);
          for (int64_t e = c; e < n_in && e < c + 16; ++e) part[e - c] = wr[e];
          wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(part));
        }
        step<W, R>(wv, x, x_row_bytes, c, acc);
      }
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) half[q][i][r] = acc[i][r];
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r * y_stride + i] = reduce16(half[0][i][r], half[1][i][r]);
    }
  }

  // A single activation row: kGemvW weight rows at a time (gemm_rows_gemv), so that several
  // outputs' dependency chains (one accumulator each, one vdpbf16ps step per 32 elements) are in
  // flight at once.
  static constexpr int kGemvW = 3;
};

constexpr MatmulKernel kKernels[] = {make_kernel<Bf16Avx2>(GgmlType::BF16, "bf16_avx2")};

}  // namespace

const MatmulKernel* avx2_bf16_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
