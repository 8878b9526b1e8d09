// AVX2 + FMA + F16C matmul kernels for Q4_K, Q6_K and Q8_0 weights. Each output is the reference
// row dot of dot_ggml_order.cc with the same float operations in the same order (8 float lanes,
// one fused multiply-add per lane and block, the same horizontal sums); only the exact integer
// parts are computed differently (maddubs / madd), so results are bitwise equal to the reference.
// Compiled with -mavx2 -mfma -mf16c; see x86/tile_driver.h for why nothing here is inline-shared.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx2;  // of every kernel in this file

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/block_tile.h"
#include "kernels/x86/k4_scales.h"
#include "kernels/x86/kquant_act.h"
#include "kernels/x86/q8_quantize_avx2.h"
#include "kernels/x86/scale_shuffles.h"
#include "kernels/x86/tile_driver.h"

// pshufb masks making 16-bit lanes of scale byte k (k < 8) of a decode_k4_header vector.
constexpr auto kScale16Shuffle =
    make_byte_table<8, 32>([](int k, int j) { return j % 2 == 1 ? 0x80 : k; });

// --- Q4_K --------------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants in element order, their scale and
// the sums of pairs of bsums (the 8 sub-blocks of 32) that the min term needs.
using ActQ4K = ActSums32<32, false>;

struct Q4K : BlockTiled<Q4K, ActQ4K, BlockQ4_K, kQK_K, 4> {
  // Reference (dot_q4_K): acc[l] += d * sum_j (sc[2j] * lanes of the low nibbles of chunk j +
  // sc[2j+1] * lanes of its high nibbles); accm[p] += -dx * dmin * (m . sums)[p] over 4 lanes.
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R> accm) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const K4Header hdr = decode_k4_header(wb);
    const __m256i scm2 = _mm256_broadcastsi128_si256(hdr.scales_mins);
    const float wd = hdr.d;
    add_k4_min_term<R>(hdr, xa, accm);
    __m256i sumi[R] = {};
#pragma GCC unroll 8
    for (int j = 0; j < 4; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qs + 32 * j));
      const __m256i lo = _mm256_and_si256(q, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const __m256i sl = _mm256_shuffle_epi8(
          scm2, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScale16Shuffle.m[2 * j])));
      const __m256i sh = _mm256_shuffle_epi8(
          scm2, _mm256_load_si256(reinterpret_cast<const __m256i*>(kScale16Shuffle.m[2 * j + 1])));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m256i xl = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[r]->qs + 64 * j));
        const __m256i xh =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[r]->qs + 64 * j + 32));
        const __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, xl), sl);
        const __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, xh), sh);
        sumi[r] = _mm256_add_epi32(sumi[r], _mm256_add_epi32(pl, ph));
      }
    }
    add_scaled_sums<R>(wd, xa, sumi, acc);
  }

  static float finish(__m256 acc, __m128 accm) { return hsum8(acc) + hsum4(accm); }
};

// --- Q6_K --------------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants and scale, and for each chunk of 32
// the 16 sums 32 * (q[2i] + q[2i+1]) that turn the products with q6 into products with q6 - 32.
using ActQ6K = ActPairSums<32, 32>;

struct Q6K : BlockTiled<Q6K, ActQ6K, BlockQ6_K, kQK_K, 4> {
  // Reference (dot_q6_K): chunk c = 4h + k holds elements 128h + 32k + e; lane l adds
  // scales[2c + l / 4] * (4 products of (q - 32) and x); acc[l] += d * lane.
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    const __m128i scales = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->scales));
    __m256i sumi[R] = {};
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->ql + 64 * h));
      const __m256i ql1 =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qh + 32 * h));
      __m256i q[4];
      q[0] = _mm256_or_si256(_mm256_and_si256(ql0, m4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      q[1] = _mm256_or_si256(_mm256_and_si256(ql1, m4),
                             _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4),
                             _mm256_and_si256(qh, m30));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                             _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
#pragma GCC unroll 8
      for (int k = 0; k < 4; ++k) {
        const int c = 4 * h + k;
        const __m256i sc = chunk_scales(scales, c);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m256i xq =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[r]->qs + 32 * c));
          const __m256i off =
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[r]->offs + 16 * c));
          const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], xq), off);
          sumi[r] = _mm256_add_epi32(sumi[r], _mm256_madd_epi16(p, sc));
        }
      }
    }
    const float wd = half_to_float(wb->d);
    add_scaled_sums<R>(wd, xa, sumi, acc);
  }
};

// --- Q8_0 --------------------------------------------------------------------------------------

// A packed activation row: the quants of all blocks (32 bytes each), then their scales as floats.
struct Q80 {
  using Block = BlockQ8_0;
  static constexpr int kBlockElems = kQK;
  static constexpr int kW = 1, kR = 4;
  static int64_t packed_row_bytes(int64_t n_in) { return round_up_64(n_in / kQK * (kQK + 4)); }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    const int64_t nb = n_in / kQK;
    int8_t* qs = static_cast<int8_t*>(dst);
    float* d = reinterpret_cast<float*>(qs + nb * kQK);
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8_0 q;
      quantize_block_q8_0_avx2(x + b * kQK, &q.d, q.qs);
      std::memcpy(qs + b * kQK, q.qs, kQK);
      d[b] = half_to_float(q.d);
    }
  }

  // Reference (dot_q8_0): lane l = the 4 products at 4l..4l+3; acc[l] += (dw * dx) * lane.
  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const int64_t nb = n_in / kQK;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const BlockQ8_0* wb = reinterpret_cast<const BlockQ8_0*>(w + i * w_row_bytes) + b;
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qs));
        const __m256i aw = _mm256_sign_epi8(wq, wq);
        const float wd = half_to_float(wb->d);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const int8_t* xr = reinterpret_cast<const int8_t*>(x + r * x_row_bytes);
          const float xd = reinterpret_cast<const float*>(xr + nb * kQK)[b];
          const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + b * kQK));
          const __m256i lanes =
              _mm256_madd_epi16(_mm256_maddubs_epi16(aw, _mm256_sign_epi8(xq, wq)), ones);
          acc[i][r] =
              _mm256_fmadd_ps(_mm256_set1_ps(wd * xd), _mm256_cvtepi32_ps(lanes), acc[i][r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r * y_stride + i] = hsum8(acc[i][r]);
    }
  }
};

constexpr MatmulKernel kKernels[] = {make_kernel<Q4K>(GgmlType::Q4_K, "q4_K_avx2"),
                                     make_kernel<Q6K>(GgmlType::Q6_K, "q6_K_avx2"),
                                     make_kernel<Q80>(GgmlType::Q8_0, "q8_0_avx2")};

}  // namespace

const MatmulKernel* avx2_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
