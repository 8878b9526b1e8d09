// AVX-512 VNNI kernels for weights in the x16 layouts (kernels/interleave.h): 16 rows at a time,
// one 32-bit lane per row. vpdpbusd multiplies 4 weight bytes of each row (unsigned codes) with 4
// broadcast activation bytes; a sub-block's vectors accumulate into one register whose lanes are
// then the rows' exact integer sub-block sums, scaled by vpmulld with the rows' scales. Per
// super-block one fused multiply-add per row (and one for Q4_K's mins), as the x16 order says, so
// results are bitwise those of dot_q4_K_x16_order / dot_q5_K_x16_order / dot_q6_K_x16_order /
// dot_q8_0_x16_order for any batch size.
// Activation rows are packed once (ActX16) with what the inner loop wants precomputed.
// Compiled with AVX-512 flags; see x86/tile_driver.h for why nothing here is inline-shared.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/interleave.h"
#include "kernels/weight_prefetch.h"
#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx512;  // of every kernel in this file

#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/q8_quantize_avx2.h"
#include "kernels/x86/tile_driver.h"

// The 4 activation bytes at x as one 32-bit value in every lane.
__m512i bcast4(const int8_t* x) { return _mm512_set1_epi32(load_i32(x)); }

__m512i load64(const void* p) { return _mm512_load_si512(p); }

// One super-block of a packed activation row: the Q8_K quants and scale, -32 * each sum of 16
// quants (the start value of a Q6_K sub-block, undoing its codes' offset of 32) and the sums of
// 32 quants paired as Q4_K's mins are (pair p: sub-blocks 2p, 2p + 1 in one 32-bit word).
struct alignas(64) ActX16 {
  int8_t qs[kQK_K];
  int32_t q6_start[16];
  int16_t sums32[8];
  float d;
};
static_assert(sizeof(ActX16) == 384);

// Software prefetch distance for the weight stream, in bytes (measured: 2-8 KiB all help, the
// hardware prefetcher alone streams ~25% slower from DRAM, on session 2's and 11's hosts), where
// the machine streams faster with prefetches at all (kernels/weight_prefetch.h: on session 20's
// Zen 4 host, none was 30-45% faster in decode).
constexpr int64_t kPrefetchAhead = 4096;

// Into L2 (T1), not L1: on Zen 4 decode ran 25% faster (BENCHMARKS.md session 11), the L1's few
// outstanding misses left to the loads.
void prefetch(bool on, const void* p) {
  if (on) _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}

// The super-block loop of the K-quant group kernels (x16 order): per block b, sums(wb, b, pf, t)
// adds the 16 rows' exact integer sums (one 32-bit lane per row) into t[r] (pf: kPrefetchAhead
// past wb, whose first five lines from kPrefetchFirst on are asked for here when pf_on, the
// caller's weight_prefetch()); then one fused
// multiply-add per row, acc[r] += (d * dx) * t[r], and for the types with mins (Q4_K, Q5_K)
// accm[r] += (dmin * dx) * (mins . sums32); the outputs are acc - accm (or acc).
template <int R, int kPrefetchFirst, class Block, class Sums>
[[gnu::always_inline]] inline void k_quant_group(const Block* w, int64_t nb,
                                                 const ActX16* const x[R], float* y,
                                                 int64_t y_stride, bool pf_on, const Sums& sums) {
  constexpr bool kMins = requires(const Block& blk) { blk.mins; };
  __m512 acc[R], accm[R];
  for (int r = 0; r < R; ++r) acc[r] = accm[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const Block& wb = w[b];
    const char* pf = reinterpret_cast<const char*>(&wb) + kPrefetchAhead;
    for (int i = 0; i < 5; ++i) prefetch(pf_on, pf + kPrefetchFirst + 64 * i);
    __m512i t[R] = {};
    sums(wb, b, pf, t);
    if constexpr (kMins) {
      __m512i mins[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) {
        mins[p] =
            _mm512_cvtepu8_epi16(_mm256_load_si256(reinterpret_cast<const __m256i*>(wb.mins[p])));
      }
      const __m512 d = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wb.d)));
      const __m512 dmin =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wb.dmin)));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i m = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p) {
          int32_t pair;
          std::memcpy(&pair, x[r][b].sums32 + 2 * p, 4);
          m = _mm512_dpwssd_epi32(m, mins[p], _mm512_set1_epi32(pair));
        }
        const __m512 dx = _mm512_set1_ps(x[r][b].d);
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(t[r]), acc[r]);
        accm[r] = _mm512_fmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(m), accm[r]);
      }
    } else {
      const __m512 d = _mm512_load_ps(wb.d);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 dx = _mm512_set1_ps(x[r][b].d);
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, dx), _mm512_cvtepi32_ps(t[r]), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(y + r * y_stride, kMins ? _mm512_sub_ps(acc[r], accm[r]) : acc[r]);
  }
}

// --- Q4_K --------------------------------------------------------------------------------------

// Outputs of one group of 16 rows for R activation rows: y[r * y_stride + j], j < 16. The
// sub-blocks go one at a time (low nibbles of a pair, then high), so the R rows' sums take R
// registers and each unpacked weight vector serves all R rows.
template <int R>
void q4_K_group(const BlockQ4KX16* w, int64_t nb, const ActX16* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = weight_prefetch();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  k_quant_group<R, 2048>(
      w, nb, x, y, y_stride, pf_on,
      [&](const BlockQ4KX16& wb, int64_t b, const char* pf, __m512i(&t)[R]) {
        for (int p = 0; p < 4; ++p) {
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            __m512i s[R] = {};
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
              const __m512i raw = load64(wb.qs[p][k]);
              if (h == 0) prefetch(pf_on, pf + 512 * p + 64 * k);
              const __m512i q = _mm512_and_si512(h == 0 ? raw : _mm512_srli_epi16(raw, 4), m4);
#pragma GCC unroll 8
              for (int r = 0; r < R; ++r)
                s[r] = _mm512_dpbusd_epi32(s[r], q, bcast4(x[r][b].qs + 64 * p + 32 * h + 4 * k));
            }
            const __m512i sc = _mm512_cvtepu8_epi32(
                _mm_load_si128(reinterpret_cast<const __m128i*>(wb.scales[2 * p + h])));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) t[r] = _mm512_add_epi32(t[r], _mm512_mullo_epi32(s[r], sc));
          }
        }
      });
}

// --- Q5_K --------------------------------------------------------------------------------------

// Q5_K in the x16 order (dot_q5_K_x16_order), as Q4_K: per sub-block c and row the exact
// integer sum of its 32 products (8 vpdpbusd, one per lane l of BlockQ5KX16, each over elements
// 4l .. 4l + 3), scaled by sc[c] into the super-block's sum t; then one fused multiply-add per
// row and super-block. Codes 0..31 times activations stay exact in the int32 sums. Decode (R < 4)
// walks the block in memory order instead, which streams it faster from DRAM (measured: 23 vs
// 15 t/s tg128 on the 1.5B Q5_K_M); both give the same integers.
// Sub-block c's 5-bit codes from a lane's vector `raw` (bits 0-3 in nibble c % 2) and its qh
// vector hb (bit 4 at bit c): one epi16 shift puts bit c at bit 4, carrying bits across bytes only
// where the mask drops them.
__m512i q5_codes(__m512i raw, __m512i hb, int c, __m512i m4, __m512i m16) {
  const __m512i nib = _mm512_and_si512(c % 2 == 0 ? raw : _mm512_srli_epi16(raw, 4), m4);
  const __m512i hs = c < 4    ? _mm512_slli_epi16(hb, 4 - c)
                     : c == 4 ? hb
                              : _mm512_srli_epi16(hb, c - 4);
  return _mm512_ternarylogic_epi32(nib, hs, m16, 0xF8);  // nib | (hs & m16)
}

template <int R>
void q5_K_group(const BlockQ5KX16* w, int64_t nb, const ActX16* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = weight_prefetch();
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i m16 = _mm512_set1_epi8(0x10);
  k_quant_group<R, 2560>(
      w, nb, x, y, y_stride, pf_on,
      [&](const BlockQ5KX16& wb, int64_t b, const char* pf, __m512i(&t)[R]) {
        if constexpr (R < 4) {
          // Few rows (decode): the block in memory order, lane by lane; each vpmaddubsw pair is
          // scaled by vpdpwssd into t (the same exact integers as the sub-block sums below).
          __m512i sc2[8];  // sub-block c's scale in both int16 halves of each row's lane
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) {
            const __m512i v = _mm512_cvtepu8_epi32(
                _mm_load_si128(reinterpret_cast<const __m128i*>(wb.scales[c])));
            sc2[c] = _mm512_or_si512(v, _mm512_slli_epi32(v, 16));
          }
#pragma GCC unroll 8
          for (int l = 0; l < 8; ++l) {
            const __m512i hb = load64(wb.q[l][4]);
            for (int i = 0; i < 5; ++i) prefetch(pf_on, pf + 320 * l + 64 * i);
            __m512i lane[R];  // one dependency chain per lane, added into t after it
            for (int r = 0; r < R; ++r) lane[r] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int v = 0; v < 4; ++v) {
              const __m512i raw = load64(wb.q[l][v]);
#pragma GCC unroll 2
              for (int h = 0; h < 2; ++h) {
                const int c = 2 * v + h;
                const __m512i q = q5_codes(raw, hb, c, m4, m16);
#pragma GCC unroll 4
                for (int r = 0; r < R; ++r) {
                  const __m512i prod = _mm512_maddubs_epi16(q, bcast4(x[r][b].qs + 32 * c + 4 * l));
                  lane[r] = _mm512_dpwssd_epi32(lane[r], prod, sc2[c]);
                }
              }
            }
            for (int r = 0; r < R; ++r) t[r] = _mm512_add_epi32(t[r], lane[r]);
          }
        } else {
      // Many rows (prompts): sub-block by sub-block, one vpdpbusd per lane and row, one vpmulld.
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) {
            __m512i s[R] = {};
#pragma GCC unroll 8
            for (int l = 0; l < 8; ++l) {
              if (c < 5) prefetch(pf_on, pf + 320 * l + 64 * c);
              const __m512i q = q5_codes(load64(wb.q[l][c / 2]), load64(wb.q[l][4]), c, m4, m16);
#pragma GCC unroll 8
              for (int r = 0; r < R; ++r)
                s[r] = _mm512_dpbusd_epi32(s[r], q, bcast4(x[r][b].qs + 32 * c + 4 * l));
            }
            const __m512i sc = _mm512_cvtepu8_epi32(
                _mm_load_si128(reinterpret_cast<const __m128i*>(wb.scales[c])));
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) t[r] = _mm512_add_epi32(t[r], _mm512_mullo_epi32(s[r], sc));
          }
        }
      });
}

// --- Q6_K --------------------------------------------------------------------------------------

template <int R>
void q6_K_group(const BlockQ6KX16* w, int64_t nb, const ActX16* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = weight_prefetch();
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  const __m512i m2 = _mm512_set1_epi8(0x03);
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  k_quant_group<R, 3072>(
      w, nb, x, y, y_stride, pf_on,
      [&](const BlockQ6KX16& wb, int64_t b, const char* pf, __m512i(&t)[R]) {
#pragma GCC unroll 2
        for (int s = 0; s < 16; ++s) {
          const __m512i r0 = load64(wb.q[s][0]);
          const __m512i r1 = load64(wb.q[s][1]);
          const __m512i r2 = load64(wb.q[s][2]);
          prefetch(pf_on, pf + 192 * s);
          prefetch(pf_on, pf + 192 * s + 64);
          prefetch(pf_on, pf + 192 * s + 128);
          const __m512i v0 = _mm512_and_si512(r0, m6);
          const __m512i v1 = _mm512_and_si512(r1, m6);
          const __m512i v2 = _mm512_and_si512(r2, m6);
          // bits 0-1 from r0 >> 6, 2-3 from r1 >> 4, 4-5 from r2 >> 2 (0xCA: bitwise select a ? b :
          // c)
          const __m512i low4 = _mm512_ternarylogic_epi32(m2, _mm512_srli_epi16(r0, 6),
                                                         _mm512_srli_epi16(r1, 4), 0xCA);
          const __m512i v3 = _mm512_and_si512(
              _mm512_ternarylogic_epi32(m4, low4, _mm512_srli_epi16(r2, 2), 0xCA), m6);
          const __m512i sc =
              _mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(wb.scales[s])));
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const int8_t* xq = x[r][b].qs + 16 * s;
            __m512i sum = _mm512_set1_epi32(x[r][b].q6_start[s]);
            sum = _mm512_dpbusd_epi32(sum, v0, bcast4(xq));
            sum = _mm512_dpbusd_epi32(sum, v1, bcast4(xq + 4));
            sum = _mm512_dpbusd_epi32(sum, v2, bcast4(xq + 8));
            sum = _mm512_dpbusd_epi32(sum, v3, bcast4(xq + 12));
            t[r] = _mm512_add_epi32(t[r], _mm512_mullo_epi32(sum, sc));
          }
        }
      });
}

// --- Q8_0 --------------------------------------------------------------------------------------

// Two Q8_0 blocks of a packed activation row: the quants, -128 * each block's sum (the start value
// undoing the weights' +128) and the scales as floats.
struct alignas(64) ActX16Q80 {
  int8_t qs[64];
  int32_t start[2];
  float d[2];
};
static_assert(sizeof(ActX16Q80) == 128);

template <int R>
void q8_0_group(const BlockQ80X16* w, int64_t nb, const ActX16Q80* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = weight_prefetch();
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ80X16& wb = w[b];
    const char* pf = reinterpret_cast<const char*>(&wb) + kPrefetchAhead;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i s[R];
      for (int r = 0; r < R; ++r) s[r] = _mm512_set1_epi32(x[r][b].start[h]);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i q = load64(wb.qs[h][k]);
        prefetch(pf_on, pf + 512 * h + 64 * k);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
          s[r] = _mm512_dpbusd_epi32(s[r], q, bcast4(x[r][b].qs + 32 * h + 4 * k));
      }
      const __m512 d =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wb.d[h])));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(x[r][b].d[h])),
                                 _mm512_cvtepi32_ps(s[r]), acc[r]);
      }
    }
    prefetch(pf_on, pf + 1024);
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(y + r * y_stride, acc[r]);
}

// Two groups of 16 rows (g and g + 1, 32 outputs) for R activation rows: each broadcast of 4
// activation bytes feeds two vpdpbusd, one per group, so a pass needs half the broadcasts per
// product of q8_0_group (measured: pp512 107 -> 127 t/s on one Zen 4 core; the same pairing
// gains nothing for Q4_K, whose nibble unpacking and scale steps weigh more).
// Per output the same operations in the same order: bitwise q8_0_group's results.
template <int R>
void q8_0_group_pair(const BlockQ80X16* w0, const BlockQ80X16* w1, int64_t nb,
                     const ActX16Q80* const x[R], float* y, int64_t y_stride) {
  const bool pf_on = weight_prefetch();
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ80X16& wa = w0[b];
    const BlockQ80X16& wb = w1[b];
    const char* pfa = reinterpret_cast<const char*>(&wa) + kPrefetchAhead;
    const char* pfb = reinterpret_cast<const char*>(&wb) + kPrefetchAhead;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m512i s[R][2];
      for (int r = 0; r < R; ++r) s[r][0] = s[r][1] = _mm512_set1_epi32(x[r][b].start[h]);
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) {
        const __m512i qa = load64(wa.qs[h][k]);
        const __m512i qb = load64(wb.qs[h][k]);
        prefetch(pf_on, pfa + 512 * h + 64 * k);
        prefetch(pf_on, pfb + 512 * h + 64 * k);
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i xv = bcast4(x[r][b].qs + 32 * h + 4 * k);
          s[r][0] = _mm512_dpbusd_epi32(s[r][0], qa, xv);
          s[r][1] = _mm512_dpbusd_epi32(s[r][1], qb, xv);
        }
      }
      const __m512 da =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wa.d[h])));
      const __m512 db =
          _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wb.d[h])));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 dx = _mm512_set1_ps(x[r][b].d[h]);
        acc[r][0] = _mm512_fmadd_ps(_mm512_mul_ps(da, dx), _mm512_cvtepi32_ps(s[r][0]), acc[r][0]);
        acc[r][1] = _mm512_fmadd_ps(_mm512_mul_ps(db, dx), _mm512_cvtepi32_ps(s[r][1]), acc[r][1]);
      }
    }
    prefetch(pf_on, pfa + 1024);
    prefetch(pf_on, pfb + 1024);
  }
  for (int r = 0; r < R; ++r) {
    _mm512_storeu_ps(y + r * y_stride, acc[r][0]);
    _mm512_storeu_ps(y + r * y_stride + kX16Rows, acc[r][1]);
  }
}

// --- driver ------------------------------------------------------------------------------------

// Activation rows per pass over a group's weights (their unpacked vectors are reused this often).
constexpr int kRows = 8;
// Q8_0 groups in pairs (q8_0_group_pair), up to 6 activation rows a pass: twice the accumulators
// of a single group must fit the 32 registers.
constexpr int kQ80PairRows = 6;

#include "kernels/x86/x16_driver.h"

}  // namespace

const MatmulKernel* avx512_x16_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
