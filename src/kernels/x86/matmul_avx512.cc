// AVX-512 (F/BW/VL/DQ + VNNI) matmul kernels for Q4_K, Q6_K, Q8_0 and F16 weights. The integer
// work runs 512 bits wide and exactly; every output then gets the reference row dot's float
// operations in the reference's order (dot_ggml_order.cc), so results are bitwise equal to the
// scalar reference and to the AVX2 kernels.
//  - Q4_K / Q6_K: vpmaddubsw makes 16-bit sums of two products, vpdpwssd adds scale * two of
//    them into each 32-bit lane; the two 256-bit halves (two chunks of 32 elements) are summed
//    before the float step, one fused multiply-add on 8 lanes per super-block as the reference.
//  - Q8_0: vpdpbusd (u8 x s8, four products per lane) on weights biased by +128; two weight rows
//    share each 512-bit register, one per half, with the reference's 8-lane order in each.
//  - F16: ggml_vec_dot_f16's 4 x 16 lanes.
// Packed activations carry what this needs, computed once per row: quants reordered to match the
// weight nibble layout (Q4_K), or the sums that undo the unsigned weight codes (Q6_K: q - 32,
// Q8_0: w + 128).
// Compiled with AVX-512 flags; see x86/tile_driver.h for why nothing here is inline-shared.

// GCC 12's AVX-512 cast intrinsics (_mm512_castsi256_si512 ...) read a deliberately undefined
// register and then warn about it when inlined; the upper halves are always overwritten.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx512;  // of every kernel in this file

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/avx512_basics.h"
#include "kernels/x86/block_tile.h"
#include "kernels/x86/k4_scales.h"
#include "kernels/x86/kquant_act.h"
#include "kernels/x86/tile_driver.h"

// --- Q4_K --------------------------------------------------------------------------------------

// One super-block of a packed activation row. The weights' qs bytes 64g..64g+63 (g < 2) hold the
// chunks of 64 elements 2g and 2g+1; their low nibbles are elements 128g + [0, 32) and
// 128g + 64 + [0, 32), their high nibbles 128g + 32 + [0, 32) and 128g + 96 + [0, 32), and that
// is the order of qs here: lo(g) = qs[128g, +64), hi(g) = qs[128g + 64, +64).
using ActQ4K = ActSums32<64, true>;

// pshufb masks (per 128-bit lane, on the decode_k4_header vector broadcast to all four) giving
// lo(g) / hi(g) their scales as 16-bit lanes: the lower 256 bits (chunk 2g) and the upper 256
// bits (chunk 2g + 1) of vector v = 2g + (0 for lo, 1 for hi) use scales 4g + v % 2 and
// 4g + 2 + v % 2.
// (16-bit lane i: lanes 0..15 chunk 2g, 16..31 chunk 2g + 1.)
constexpr auto kQ4KScaleShuffle = make_byte_table<4, 64>(
    [](int v, int j) { return j % 2 == 1 ? 0x80 : 4 * (v / 2) + v % 2 + (j / 2 < 16 ? 0 : 2); });

struct Q4K : BlockTiled<Q4K, ActQ4K, BlockQ4_K, kQK_K, 6> {
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R> accm) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const K4Header hdr = decode_k4_header(wb);
    const __m128i scm = hdr.scales_mins;
    const float wd = hdr.d;
    add_k4_min_term<R>(hdr, xa, accm);
    const __m512i scm4 = _mm512_broadcast_i32x4(scm);
    __m512i q[4], s[4];
    for (int g = 0; g < 2; ++g) {
      const __m512i raw = _mm512_loadu_si512(wb->qs + 64 * g);
      q[2 * g] = _mm512_and_si512(raw, m4);
      q[2 * g + 1] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4);
    }
#pragma GCC unroll 8
    for (int v = 0; v < 4; ++v)
      s[v] = _mm512_shuffle_epi8(scm4, _mm512_load_si512(kQ4KScaleShuffle.m[v]));
    // maddubs: 16-bit sums of 2 products (at most 2 * 15 * 127).
    add_super_block<R, false>(q, s, wd, xa, acc);
  }

  static float finish(__m256 acc, __m128 accm) { return hsum8(acc) + hsum4(accm); }
};

// --- Q6_K --------------------------------------------------------------------------------------

// One super-block of a packed activation row: the Q8_K quants, and for each pair of quants
// 32 * their sum, which turns maddubs with the unsigned codes q into products with q - 32.
using ActQ6K = ActPairSums<64, 32>;

struct Q6K : BlockTiled<Q6K, ActQ6K, BlockQ6_K, kQK_K, 6> {
  // Vector v = 2h + k2 holds elements 64v + [0, 64): for h = v / 2 the low nibbles of ql[64h, +64)
  // (k2 = 0, elements 128h + [0, 64)) or the high ones (k2 = 1), with top bits from qh[32h, +32):
  // bits 0-1 | 2-3 for k2 = 0 and bits 4-5 | 6-7 for k2 = 1 (lower | upper 32 bytes).
  template <int R>
  static void block(int64_t, const Block* wb, Rows<R> xa, Acc<R> acc, Acc2<R>) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m256i scales =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wb->scales)));
    __m512i q[4], s[4];
#pragma GCC unroll 8
    for (int h = 0; h < 2; ++h) {
      const __m512i ql = _mm512_loadu_si512(wb->ql + 64 * h);
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qh + 32 * h));
      const __m512i qh2 =
          _mm512_inserti64x4(_mm512_castsi256_si512(qh), _mm256_srli_epi16(qh, 2), 1);
      q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4),
                                 _mm512_and_si512(_mm512_slli_epi16(qh2, 4), m30));
      q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                     _mm512_and_si512(qh2, m30));
    }
#pragma GCC unroll 8
    for (int v = 0; v < 4; ++v) {
      s[v] = vector_scales(scales, v);
    }
    const float wd = half_to_float(wb->d);
    // maddubs: 16-bit sums of 2 products q * x (at most 2 * 63 * 128), minus 32 * (x + x').
    add_super_block<R, true>(q, s, wd, xa, acc);
  }
};

// --- Q8_0 --------------------------------------------------------------------------------------

// One block of a packed activation row: the quants, -128 * the sum of each group of 4 (the start
// value of vpdpbusd on weights biased by +128) and the scale as a float.
struct alignas(64) ActQ80 {
  int8_t qs[kQK];
  int32_t offs[8];
};
static_assert(sizeof(ActQ80) == 64);

struct Q80 {
  using Block = BlockQ8_0;
  static constexpr int kBlockElems = kQK;
  static constexpr int kW = 4, kR = 4;
  // nb blocks, then nb float scales.
  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kQK * (sizeof(ActQ80) + 4));
  }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    const int64_t nb = n_in / kQK;
    ActQ80* a = static_cast<ActQ80*>(dst);
    float* d = reinterpret_cast<float*>(a + nb);
    for (int64_t b = 0; b < nb; ++b) {
      BlockQ8_0 q;
      quantize_block_q8_0_avx2(x + b * kQK, &q.d, q.qs);
      std::memcpy(a[b].qs, q.qs, kQK);
      for (int g = 0; g < 8; ++g) {
        a[b].offs[g] = -128 * (q.qs[4 * g] + q.qs[4 * g + 1] + q.qs[4 * g + 2] + q.qs[4 * g + 3]);
      }
      d[b] = half_to_float(q.d);
    }
  }

  // One weight row (gemv, remainders): 256-bit vpdpbusd per block.
  template <int R>
  static void tile_one_row(const uint8_t* w, int64_t n_in, const uint8_t* x, int64_t x_row_bytes,
                           float* y, int64_t y_stride) {
    const int64_t nb = n_in / kQK;
    const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
    __m256 acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
      const BlockQ8_0* wb = reinterpret_cast<const BlockQ8_0*>(w) + b;
      const __m256i wq =
          _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb->qs)), bias);
      const float wd = half_to_float(wb->d);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const ActQ80* xa = reinterpret_cast<const ActQ80*>(x + r * x_row_bytes);
        const float xd = reinterpret_cast<const float*>(xa + nb)[b];
        const __m256i off = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[b].offs));
        const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[b].qs));
        const __m256i lanes = _mm256_dpbusd_epi32(off, wq, xq);
        acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(wd * xd), _mm256_cvtepi32_ps(lanes), acc[r]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) y[r * y_stride] = hsum8(acc[r]);
  }

  // Reference (dot_q8_0): lane l = the 4 products at 4l..4l+3; acc[l] += (dw * dx) * lane.
  // Weight rows 2p and 2p + 1 of the tile share a 512-bit register, one per half.
  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    if constexpr (W == 1) {
      tile_one_row<R>(w, n_in, x, x_row_bytes, y, y_stride);
      return;
    }
    constexpr int P = (W + 1) / 2;  // row pairs; for odd W the last pair repeats its row
    const int64_t nb = n_in / kQK;
    const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 acc[P][R];
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
    }
    for (int64_t b = 0; b < nb; ++b) {
      __m512i wq[P];
      __m512 wd[P];
#pragma GCC unroll 8
      for (int p = 0; p < P; ++p) {
        const BlockQ8_0 *w0, *w1;
        row_pair_blocks<BlockQ8_0, W>(w, w_row_bytes, p, b, &w0, &w1);
        const __m512i both = _mm512_inserti64x4(
            _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0->qs))),
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1->qs)), 1);
        wq[p] = _mm512_xor_si512(both, bias);
        wd[p] = _mm512_insertf32x8(_mm512_set1_ps(half_to_float(w0->d)),
                                   _mm256_set1_ps(half_to_float(w1->d)), 1);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const ActQ80* xa = reinterpret_cast<const ActQ80*>(x + r * x_row_bytes);
        const float xd = reinterpret_cast<const float*>(xa + nb)[b];
        const __m512i xq =
            _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[b].qs)));
        const __m512i off = _mm512_broadcast_i64x4(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa[b].offs)));
#pragma GCC unroll 8
        for (int p = 0; p < P; ++p) {
          const __m512i lanes = _mm512_dpbusd_epi32(off, wq[p], xq);
          const __m512 d = _mm512_mul_ps(wd[p], _mm512_set1_ps(xd));
          acc[p][r] = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(lanes), acc[p][r]);
        }
      }
    }
#pragma GCC unroll 8
    for (int p = 0; p < P; ++p) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        y[r * y_stride + 2 * p] = hsum8(_mm512_castps512_ps256(acc[p][r]));
        if (2 * p + 1 < W)
          y[r * y_stride + 2 * p + 1] = hsum8(_mm512_extractf32x8_ps(acc[p][r], 1));
      }
    }
  }
};

// --- F16 --------------------------------------------------------------------------------------

// _mm512_reduce_add_ps's order (reduce16 of the reference): upper + lower 8, then 4, then pairs.
float reduce16(__m512 a) {
  const __m256 t8 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
  return hsum4(_mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8)));
}

__m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// A packed activation row: the values rounded to F16 (as quantize_activation_row does), held as
// floats so the inner loops do not convert them again.
int64_t f16_packed_row_bytes(int64_t n_in) { return round_up_64(n_in * 4); }

void f16_pack_row(const float* x, void* dst, int64_t n_in) {
  float* out = static_cast<float*>(dst);
  int64_t i = 0;
  for (; i + 16 <= n_in; i += 16) {
    const __m256i h =
        _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm512_storeu_ps(out + i, _mm512_cvtph_ps(h));
  }
  for (; i < n_in; ++i) out[i] = _cvtsh_ss(_cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT));
}

// ggml_vec_dot_f16's order (dot_f16 of the reference, for every batch size): 4 accumulators of
// 16 lanes over runs of 64 elements, (acc0 + acc2) + (acc1 + acc3), reduce16, then the leftover
// products (n % 64) added in double.
struct F16 {
  using Block = uint16_t;
  static constexpr int kBlockElems = 1;
  static constexpr int kW = 2, kR = 2;
  static int64_t packed_row_bytes(int64_t n_in) { return f16_packed_row_bytes(n_in); }
  static void pack_row(const float* x, void* dst, int64_t n_in) { f16_pack_row(x, dst, n_in); }

  template <int W, int R>
  static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
                   int64_t x_row_bytes, float* y, int64_t y_stride) {
    const int64_t np = n_in & ~int64_t{63};
    __m512 acc[W][R][4];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
        for (int j = 0; j < 4; ++j) acc[i][r][j] = _mm512_setzero_ps();
      }
    }
    for (int64_t e = 0; e < np; e += 64) {
#pragma GCC unroll 8
      for (int j = 0; j < 4; ++j) {
        __m512 wv[W];
#pragma GCC unroll 8
        for (int i = 0; i < W; ++i) {
          wv[i] = load_f16x16(reinterpret_cast<const uint16_t*>(w + i * w_row_bytes) + e + 16 * j);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512 xv =
              _mm512_loadu_ps(reinterpret_cast<const float*>(x + r * x_row_bytes) + e + 16 * j);
#pragma GCC unroll 8
          for (int i = 0; i < W; ++i) acc[i][r][j] = _mm512_fmadd_ps(wv[i], xv, acc[i][r][j]);
        }
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
      const uint16_t* wr = reinterpret_cast<const uint16_t*>(w + i * w_row_bytes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const float* xf = reinterpret_cast<const float*>(x + r * x_row_bytes);
        const __m512 a = _mm512_add_ps(_mm512_add_ps(acc[i][r][0], acc[i][r][2]),
                                       _mm512_add_ps(acc[i][r][1], acc[i][r][3]));
        double sum = reduce16(a);
        for (int64_t e = np; e < n_in; ++e) sum += static_cast<double>(_cvtsh_ss(wr[e]) * xf[e]);
        y[r * y_stride + i] = static_cast<float>(sum);
      }
    }
  }
};

constexpr MatmulKernel kKernels[] = {make_kernel<Q4K>(GgmlType::Q4_K, "q4_K_avx512"),
                                     make_kernel<Q6K>(GgmlType::Q6_K, "q6_K_avx512"),
                                     make_kernel<Q80>(GgmlType::Q8_0, "q8_0_avx512"),
                                     make_kernel<F16>(GgmlType::F16, "f16_avx512")};

}  // namespace

const MatmulKernel* avx512_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
