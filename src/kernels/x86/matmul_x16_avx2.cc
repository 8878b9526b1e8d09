// The 256-bit kernels for weights in the x16 layouts (kernels/interleave.h), for CPUs without
// AVX-512 VNNI: the same outputs as x86/matmul_x16_avx512.cc, bit for bit. Compiled twice, for
// AVX2 + FMA + F16C and, again with -mavxvnni and PONDER_AVXVNNI=1 (src/kernels/CMakeLists.txt),
// for AVX-VNNI: they differ only in how the exact integer sums are made (kVnni).
// A 64-byte x16 vector holds 4 weight bytes of each of 16 rows; its lower 32 bytes (rows 0-7) and
// its upper 32 bytes (rows 8-15) are two independent "halves", each one 32-bit lane per row, done
// one after the other inside a super-block (the other half's bytes are then in L1).
//
// Without vpdpbusd the exact integer sums come from vpmaddubsw (u8 x s8 -> saturating int16 pairs)
// and vpmaddwd. Saturation never happens: Q4_K codes (0..15) x |activation| <= 127 stay below
// 32767 summed over a whole sub-block of 32 (8 * 2 * 15 * 127 = 30480), so each sub-block needs
// one vpmaddwd, which also multiplies by the rows' scales; Q6_K codes (0..63) allow two vpmaddubsw
// results per int16 sum (2 * 2 * 63 * 127 = 32004); Q8_0 codes (-128..127, stored + 128) go in as
// |w| with the activation given w's sign (vpsignb), 2 * 128 * 127 = 32512 per pair. Q5_K's
// vpmaddubsw pairs (2 * 31 * 127) are each scaled by their own vpmaddwd.
// With AVX-VNNI, vpdpbusd makes a sub-block's int32 sums in one instruction per 4 bytes of each
// row (Q4_K, Q6_K: then scaled by vpmulld; Q8_0 on the stored unsigned codes, from the start value
// -128 * sum x), and vpdpwssd scales and adds Q5_K's pairs: the same integers, fewer instructions.
// Then one fused multiply-add per row and super-block (per block for Q8_0), in the order of
// dot_q4_K_x16_order / dot_q5_K_x16_order / dot_q6_K_x16_order / dot_q8_0_x16_order, for any
// batch size.
// See x86/tile_driver.h for why nothing here is inline-shared.
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

// kIsa and kVnni, which the headers below use.
#include "kernels/x86/ymm_level.h"
// The steps shared with the other x86 kernels.
#include "kernels/x86/avx2_basics.h"
#include "kernels/x86/q8_quantize_avx2.h"
#include "kernels/x86/tile_driver.h"

// Rows of an x16 group in one 256-bit vector (one "half").
constexpr int kHalfRows = kX16Rows / 2;

// One super-block of a packed activation row: the Q8_K quants, the sums of 16 quants (Q6_K's
// offset of 32: sum (q - 32) x = sum q x - 32 * sum x), the sums of 32 quants (Q4_K's mins) and
// the scale.
struct alignas(64) ActX16 {
  int8_t qs[kQK_K];
  int16_t bsums[16];
  int16_t sums32[8];
  float d;
};
static_assert(sizeof(ActX16) == 320);

// The 4 bytes at p as one 32-bit value in every lane.
__m256i bcast4(const void* p) { return _mm256_set1_epi32(load_i32(p)); }

__m256i load32(const void* p) { return _mm256_load_si256(static_cast<const __m256i*>(p)); }
__m128i load16(const void* p) { return _mm_load_si128(static_cast<const __m128i*>(p)); }
__m128i load8(const void* p) { return _mm_loadl_epi64(static_cast<const __m128i*>(p)); }

// The 8 scale bytes at p (one per row) as int16 pairs (sc[j], sc[j]) in 32-bit lane j: vpmaddwd
// with it turns a row's two int16 partial sums into sc[j] * (their sum).
__m256i scale_pairs_u8(const uint8_t* p) {
  const __m128i v = load8(p);
  return _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(v, v));
}
__m256i scale_pairs_s8(const int8_t* p) {
  const __m128i v = load8(p);
  return _mm256_cvtepi8_epi16(_mm_unpacklo_epi8(v, v));
}

// An empty asm that says it reads and writes v: the sums stay a chain of adds in one register each
// (GCC otherwise reassociates a fully unrolled chain of integer adds into a tree, computing every
// product first and spilling them to the stack: 3x slower prompts, measured on Zen 4 with AVX2).
inline void keep_in_register(__m256i& v) { asm("" : "+x"(v)); }

// The 8 scale bytes at p (one per row) as int32 lanes, for vpmulld.
[[maybe_unused]] __m256i scales_u8_i32(const uint8_t* p) { return _mm256_cvtepu8_epi32(load8(p)); }
[[maybe_unused]] __m256i scales_s8_i32(const int8_t* p) { return _mm256_cvtepi8_epi32(load8(p)); }

// Software prefetch distance for the weight stream, in bytes (as in the AVX-512 kernels). Only the
// one-row passes (decode) prefetch, and only where the machine streams faster so
// (kernels/weight_prefetch.h): the many-row passes read a group's weights once from memory and
// then from the caches, where the prefetches only took load slots (measured on Zen 4).
constexpr int64_t kPrefetchAhead = 4096;

void prefetch(bool on, const void* p) {
  if (on) _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T0);
}

// --- Q4_K --------------------------------------------------------------------------------------

// The super-block loop of the types with mins (Q4_K, Q5_K), both halves of a group: sums(wb, b,
// row0, hf, pf, t) leaves in t[r] a half's exact integer sum sum_c sc[c] * (sub-block c's products)
// for activation row r; then per half and row one fused multiply-add for t and one for the mins,
// acc += (d * dx) * t, accm += (dmin * dx) * (mins . sums32), and the outputs are acc - accm.
template <int R, int kPrefetchFirst, class Block, class Sums>
[[gnu::always_inline]] inline void k_mins_group(const Block* w, int64_t nb,
                                                const ActX16* const x[R], float* y,
                                                int64_t y_stride, bool pf_on, const Sums& sums) {
  __m256 acc[R][2], accm[R][2];
  for (int r = 0; r < R; ++r) {
    for (int hf = 0; hf < 2; ++hf) acc[r][hf] = accm[r][hf] = _mm256_setzero_ps();
  }
  for (int64_t b = 0; b < nb; ++b) {
    const Block& wb = w[b];
    const char* pf = reinterpret_cast<const char*>(&wb) + kPrefetchAhead;
    for (int i = 0; i < 5; ++i) prefetch(pf_on, pf + kPrefetchFirst + 64 * i);
#pragma GCC unroll 2
    for (int hf = 0; hf < 2; ++hf) {
      const int row0 = kHalfRows * hf;
      __m256i t[R];
      for (int r = 0; r < R; ++r) t[r] = _mm256_setzero_si256();
      sums(wb, b, row0, hf, pf, t);
      // mins[p]: the int16 pairs (m[2p], m[2p + 1]) of the half's rows.
      __m256i mins[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p) mins[p] = _mm256_cvtepu8_epi16(load16(wb.mins[p][row0]));
      const __m256 d = _mm256_cvtph_ps(load16(wb.d + row0));
      const __m256 dmin = _mm256_cvtph_ps(load16(wb.dmin + row0));
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        __m256i m = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int p = 0; p < 4; ++p)
          m = _mm256_add_epi32(m, _mm256_madd_epi16(mins[p], bcast4(x[r][b].sums32 + 2 * p)));
        const __m256 dx = _mm256_set1_ps(x[r][b].d);
        acc[r][hf] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(t[r]), acc[r][hf]);
        accm[r][hf] = _mm256_fmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(m), accm[r][hf]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int hf = 0; hf < 2; ++hf) {
      _mm256_storeu_ps(y + r * y_stride + kHalfRows * hf, _mm256_sub_ps(acc[r][hf], accm[r][hf]));
    }
  }
}

// Outputs of one group of 16 rows for R activation rows: y[r * y_stride + j], j < 16. Sub-blocks
// go one at a time (low nibbles of a pair, then high); each sub-block's products of a half sum in
// one int16 register per activation row, so each unpacked weight vector serves all R rows.
template <int R>
void q4_K_group(const BlockQ4KX16* w, int64_t nb, const ActX16* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = R == 1 && weight_prefetch();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  k_mins_group<R, 2048>(
      w, nb, x, y, y_stride, pf_on,
      [&](const BlockQ4KX16& wb, int64_t b, int row0, int hf, const char* pf, __m256i(&t)[R]) {
        for (int p = 0; p < 4; ++p) {
#pragma GCC unroll 2
          for (int h = 0; h < 2; ++h) {
            __m256i s[R];  // int16 (at most 8 * 2 * 15 * 127, set at k = 0), or int32 with AVX-VNNI
            if constexpr (kVnni) {
              for (int r = 0; r < R; ++r) s[r] = _mm256_setzero_si256();
            }
#pragma GCC unroll 8
            for (int k = 0; k < 8; ++k) {
              const __m256i raw = load32(wb.qs[p][k][row0]);
              if (hf == 0 && h == 0) prefetch(pf_on, pf + 512 * p + 64 * k);
              const __m256i q = _mm256_and_si256(h == 0 ? raw : _mm256_srli_epi16(raw, 4), m4);
#pragma GCC unroll 4
              for (int r = 0; r < R; ++r) {
                const __m256i xq = bcast4(x[r][b].qs + 64 * p + 32 * h + 4 * k);
                if constexpr (kVnni) {
                  s[r] = _mm256_dpbusd_avx_epi32(s[r], q, xq);
                } else {
                  const __m256i prod = _mm256_maddubs_epi16(q, xq);
                  s[r] = k == 0 ? prod : _mm256_add_epi16(s[r], prod);
                }
                keep_in_register(s[r]);
              }
            }
            if constexpr (kVnni) {
              const __m256i sc = scales_u8_i32(wb.scales[2 * p + h] + row0);
#pragma GCC unroll 4
              for (int r = 0; r < R; ++r)
                t[r] = _mm256_add_epi32(t[r], _mm256_mullo_epi32(s[r], sc));
            } else {
              const __m256i sc = scale_pairs_u8(wb.scales[2 * p + h] + row0);
#pragma GCC unroll 4
              for (int r = 0; r < R; ++r)
                t[r] = _mm256_add_epi32(t[r], _mm256_madd_epi16(s[r], sc));
            }
          }
        }
      });
}

// --- Q5_K --------------------------------------------------------------------------------------

// Q5_K in the x16 order (dot_q5_K_x16_order), on the layout the AVX-512 kernel reads: per half
// and row the super-block's exact integer sum t = sum_c sc[c] * (sub-block c's products), built
// from vpmaddubsw pairs (at most 2 * 31 * 127) that vpmaddwd scales by sc[c] into int32 (integer
// sums: their order does not matter); then one fused multiply-add per row and super-block for t
// and one for the mins, as Q4_K.
template <int R>
void q5_K_group(const BlockQ5KX16* w, int64_t nb, const ActX16* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = R == 1 && weight_prefetch();
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i m16 = _mm256_set1_epi8(0x10);
  k_mins_group<R, 2560>(
      w, nb, x, y, y_stride, pf_on,
      [&](const BlockQ5KX16& wb, int64_t b, int row0, int hf, const char* pf, __m256i(&t)[R]) {
        __m256i sc2[8];
#pragma GCC unroll 8
        for (int c = 0; c < 8; ++c) sc2[c] = scale_pairs_u8(wb.scales[c] + row0);
#pragma GCC unroll 8
        for (int l = 0; l < 8; ++l) {
          const __m256i hb = load32(wb.q[l][4][row0]);
          for (int i = 0; i < 5 && hf == 0; ++i) prefetch(pf_on, pf + 320 * l + 64 * i);
#pragma GCC unroll 4
          for (int v = 0; v < 4; ++v) {
            const __m256i raw = load32(wb.q[l][v][row0]);
#pragma GCC unroll 2
            for (int h = 0; h < 2; ++h) {
              const int c = 2 * v + h;
              const __m256i nib = _mm256_and_si256(h == 0 ? raw : _mm256_srli_epi16(raw, 4), m4);
              const __m256i hs = c < 4    ? _mm256_slli_epi16(hb, 4 - c)
                                 : c == 4 ? hb
                                          : _mm256_srli_epi16(hb, c - 4);
              const __m256i q = _mm256_or_si256(nib, _mm256_and_si256(hs, m16));
#pragma GCC unroll 4
              for (int r = 0; r < R; ++r) {
                const __m256i prod = _mm256_maddubs_epi16(q, bcast4(x[r][b].qs + 32 * c + 4 * l));
                if constexpr (kVnni) {
                  t[r] = _mm256_dpwssd_avx_epi32(t[r], prod, sc2[c]);
                } else {
                  t[r] = _mm256_add_epi32(t[r], _mm256_madd_epi16(prod, sc2[c]));
                }
                keep_in_register(t[r]);
              }
            }
          }
        }
      });
}

// --- Q6_K --------------------------------------------------------------------------------------

// Per sub-block: sum q x from the 0..63 codes (two int16 sums of two vpmaddubsw each), scaled by
// vpmaddwd; per super-block the offset term -32 * sum_s sc[s] * bsums[s], also by vpmaddwd.
template <int R>
void q6_K_group(const BlockQ6KX16* w, int64_t nb, const ActX16* const x[R], float* y,
                int64_t y_stride) {
  const bool pf_on = R == 1 && weight_prefetch();
  const __m256i m6 = _mm256_set1_epi8(0x3F);
  const __m256i m01 = _mm256_set1_epi8(0x03);
  const __m256i m23 = _mm256_set1_epi8(0x0C);
  const __m256i m45 = _mm256_set1_epi8(0x30);
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6KX16& wb = w[b];
    const char* pf = reinterpret_cast<const char*>(&wb) + kPrefetchAhead;
    for (int i = 0; i < 5; ++i) prefetch(pf_on, pf + 3072 + 64 * i);
#pragma GCC unroll 2
    for (int hf = 0; hf < 2; ++hf) {
      const int row0 = kHalfRows * hf;
      __m256i t[R];
      for (int r = 0; r < R; ++r) t[r] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int s = 0; s < 16; ++s) {
        const __m256i r0 = load32(wb.q[s][0][row0]);
        const __m256i r1 = load32(wb.q[s][1][row0]);
        const __m256i r2 = load32(wb.q[s][2][row0]);
        if (hf == 0) {
          prefetch(pf_on, pf + 192 * s);
          prefetch(pf_on, pf + 192 * s + 64);
          prefetch(pf_on, pf + 192 * s + 128);
        }
        const __m256i v0 = _mm256_and_si256(r0, m6);
        const __m256i v1 = _mm256_and_si256(r1, m6);
        const __m256i v2 = _mm256_and_si256(r2, m6);
        // bits 0-1 from r0 >> 6, 2-3 from r1 >> 4, 4-5 from r2 >> 2
        const __m256i v3 =
            _mm256_or_si256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(r0, 6), m01),
                                            _mm256_and_si256(_mm256_srli_epi16(r1, 4), m23)),
                            _mm256_and_si256(_mm256_srli_epi16(r2, 2), m45));
        if constexpr (kVnni) {
          // The sub-block's int32 sums of codes times activations, scaled by vpmulld.
          const __m256i sc = scales_s8_i32(wb.scales[s] + row0);
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const int8_t* xq = x[r][b].qs + 16 * s;
            __m256i p = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), v0, bcast4(xq));
            p = _mm256_dpbusd_avx_epi32(p, v1, bcast4(xq + 4));
            p = _mm256_dpbusd_avx_epi32(p, v2, bcast4(xq + 8));
            p = _mm256_dpbusd_avx_epi32(p, v3, bcast4(xq + 12));
            t[r] = _mm256_add_epi32(t[r], _mm256_mullo_epi32(p, sc));
            keep_in_register(t[r]);
          }
          continue;
        }
        const __m256i sc = scale_pairs_s8(wb.scales[s] + row0);
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          const int8_t* xq = x[r][b].qs + 16 * s;
          const __m256i lo = _mm256_add_epi16(_mm256_maddubs_epi16(v0, bcast4(xq)),
                                              _mm256_maddubs_epi16(v1, bcast4(xq + 4)));
          const __m256i hi = _mm256_add_epi16(_mm256_maddubs_epi16(v2, bcast4(xq + 8)),
                                              _mm256_maddubs_epi16(v3, bcast4(xq + 12)));
          t[r] = _mm256_add_epi32(
              t[r], _mm256_add_epi32(_mm256_madd_epi16(lo, sc), _mm256_madd_epi16(hi, sc)));
          keep_in_register(t[r]);
        }
      }
      // off[r] = sum_s sc[s] * bsums[s], sub-blocks in pairs (int16 pairs (sc[2i], sc[2i + 1])).
      __m256i off[R];
      for (int r = 0; r < R; ++r) off[r] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const __m256i sc2 = _mm256_cvtepi8_epi16(
            _mm_unpacklo_epi8(load8(wb.scales[2 * i] + row0), load8(wb.scales[2 * i + 1] + row0)));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r)
          off[r] = _mm256_add_epi32(off[r], _mm256_madd_epi16(sc2, bcast4(x[r][b].bsums + 2 * i)));
      }
      const __m256 d = _mm256_load_ps(wb.d + row0);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) {
        const __m256i tr = _mm256_sub_epi32(t[r], _mm256_slli_epi32(off[r], 5));
        const __m256 dx = _mm256_set1_ps(x[r][b].d);
        acc[r][hf] = _mm256_fmadd_ps(_mm256_mul_ps(d, dx), _mm256_cvtepi32_ps(tr), acc[r][hf]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int hf = 0; hf < 2; ++hf) _mm256_storeu_ps(y + r * y_stride + kHalfRows * hf, acc[r][hf]);
  }
}

// --- Q8_0 --------------------------------------------------------------------------------------

// Two Q8_0 blocks of a packed activation row: the quants, the scales as floats and (for
// vpdpbusd on the weights' stored unsigned codes, AVX-VNNI) the start values -128 * sum x.
struct alignas(64) ActX16Q80 {
  int8_t qs[64];
  float d[2];
  int32_t start[2];
};
static_assert(sizeof(ActX16Q80) == 128);

template <int R>
void q8_0_group(const BlockQ80X16* w, int64_t nb, const ActX16Q80* const x[R], float* y,
                int64_t y_stride) {
  // vpdpbusd for prompts only: one row (decode) ran 8-10% slower with it than with the AVX2 steps
  // on Zen 5 (27.4 vs 30.0, 19.1 vs 20.7 t/s tg128 on the 1.5B Q8_0, three rounds; a second chain
  // for odd k did not help): the same integers either way.
  constexpr bool kDpbusd = kVnni && R > 1;
  const bool pf_on = R == 1 && weight_prefetch();
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ80X16& wb = w[b];
    const char* pf = reinterpret_cast<const char*>(&wb) + kPrefetchAhead;
#pragma GCC unroll 2
    for (int hf = 0; hf < 2; ++hf) {
      const int row0 = kHalfRows * hf;
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        __m256i s[R];
        for (int r = 0; r < R; ++r)
          s[r] = kDpbusd ? _mm256_set1_epi32(x[r][b].start[h]) : _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int k = 0; k < 8; ++k) {
          const __m256i stored = load32(wb.qs[h][k][row0]);  // the codes + 128
          if (hf == 0) prefetch(pf_on, pf + 512 * h + 64 * k);
          if constexpr (kDpbusd) {
#pragma GCC unroll 4
            for (int r = 0; r < R; ++r) {
              s[r] = _mm256_dpbusd_avx_epi32(s[r], stored, bcast4(x[r][b].qs + 32 * h + 4 * k));
              keep_in_register(s[r]);
            }
            continue;
          }
          const __m256i q = _mm256_xor_si256(stored, bias);  // the codes
          const __m256i aq = _mm256_abs_epi8(q);             // -128 gives 0x80: 128 as unsigned
#pragma GCC unroll 4
          for (int r = 0; r < R; ++r) {
            const __m256i xs = _mm256_sign_epi8(bcast4(x[r][b].qs + 32 * h + 4 * k), q);
            s[r] = _mm256_add_epi32(s[r], _mm256_madd_epi16(_mm256_maddubs_epi16(aq, xs), ones));
            keep_in_register(s[r]);
          }
        }
        const __m256 d = _mm256_cvtph_ps(load16(wb.d[h] + row0));
#pragma GCC unroll 4
        for (int r = 0; r < R; ++r) {
          acc[r][hf] = _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(x[r][b].d[h])),
                                       _mm256_cvtepi32_ps(s[r]), acc[r][hf]);
        }
      }
    }
    prefetch(pf_on, pf + 1024);
  }
  for (int r = 0; r < R; ++r) {
    for (int hf = 0; hf < 2; ++hf) _mm256_storeu_ps(y + r * y_stride + kHalfRows * hf, acc[r][hf]);
  }
}

// --- driver ------------------------------------------------------------------------------------

// Activation rows per pass over a group's weights: R int32 sums and R int16 sub-block sums (or R
// int32 block sums) of a half, plus the unpacked weights, fit the 16 ymm registers.
constexpr int kRows = 4;
constexpr int kQ80PairRows = 0;  // no pairs of groups: their accumulators would not fit

#include "kernels/x86/x16_driver.h"

}  // namespace

const MatmulKernel* PONDER_YMM_ENTRY(x16)(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
