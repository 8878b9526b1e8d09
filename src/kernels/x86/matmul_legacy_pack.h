// The activation quantizer of the legacy-type kernels (x86/matmul_legacy_*.cc): one block of 32
// floats rounded exactly as quantize_activation_row of dot_ggml_order.cc rounds it to Q8_0 or Q8_1
// (amax, d = amax / 127 stored as f16, q = round-to-nearest-even of x * (127 / amax), Q8_1's
// s = f16(d * sum(q)) with the unrounded d), plus the integer sums of the quants the kernels fold
// into their start values. Included only inside the anonymous namespace of those translation units
// (compiled with at least -mavx2 -mfma -mf16c; see x86/tile_driver.h for why nothing is shared
// inline across ISAs). Also what both ISAs' Q4_0 kernels share: the packed row, the group's row
// offsets and the prefetch distance. Depends on x86/q8_quantize_avx2.h (the quants, as Q8_0 has
// them) and x86/avx2_basics.h (round_up_64), included before,
// and on quant/blocks.h and <cstring>, included by the including file (outside the namespace).
#pragma once

#include "kernels/x86/q8_quantize_avx2.h"

// Expects <immintrin.h> and <cstdint> to be included by the including file (outside the namespace).

struct LegacyActBlock {
  int8_t qs[32];
  int32_t group_sums[8];  // group_sums[l] = qs[4l] + ... + qs[4l + 3]
  int32_t sum;            // all 32 quants
  float d;                // f16(amax / 127), widened: the scale the dot multiplies by
  float s;                // Q8_1's f16(amax / 127 * sum), widened
};

inline void quantize_legacy_block_avx2(const float* x, LegacyActBlock* out) {
  float d;
  const __m256i q8 = q8_0_quants_avx2(x, &d);
  out->d = _cvtsh_ss(static_cast<uint16_t>(_cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT)));
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

// The weight rows are read as several interleaved streams (8 or 16 rows for Q4_0), which the
// hardware prefetchers follow poorly: each kernel asks for the block kPrefetchBlocks ahead in every
// row (every second block, 36-48 bytes apart, so no cache line is skipped). Measured on a single
// gemv thread out of DRAM (AVX-512): Q4_0 ~4.6 -> ~6.5 GB/s.
constexpr int64_t kPrefetchBlocks = 64;
void prefetch_ahead(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }

// A packed Q4_0 activation row: the quants of all blocks (32 bytes each), their scales as floats,
// and kOffScale * the sum of each block's quants (the sums that undo the weights' unsigned codes,
// q - 8: 8 where they are subtracted, -8 where they start a vpdpbusd sum).
template <int kOffScale>
struct Q40ActRow {
  static int64_t packed_row_bytes(int64_t n_in) { return round_up_64(n_in / kQK * (kQK + 8)); }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    const int64_t nb = n_in / kQK;
    int8_t* qs = static_cast<int8_t*>(dst);
    float* d = reinterpret_cast<float*>(qs + nb * kQK);
    int32_t* off = reinterpret_cast<int32_t*>(d + nb);
    for (int64_t b = 0; b < nb; ++b) {
      LegacyActBlock a;
      quantize_legacy_block_avx2(x + b * kQK, &a);
      std::memcpy(qs + b * kQK, a.qs, kQK);
      d[b] = a.d;
      off[b] = kOffScale * a.sum;
    }
  }

  // The quants, scales and sums of R packed rows of nb blocks starting at x.
  template <int R>
  static void rows(const uint8_t* x, int64_t x_row_bytes, int64_t nb, const int8_t* (&xq)[R],
                   const float* (&xd)[R], const int32_t* (&xoff)[R]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      xq[r] = reinterpret_cast<const int8_t*>(x + r * x_row_bytes);
      xd[r] = reinterpret_cast<const float*>(xq[r] + nb * kQK);
      xoff[r] = reinterpret_cast<const int32_t*>(xd[r] + nb);
    }
  }
};

// Byte offsets of the kG weight rows of a Q4_0 group from its first row; rows >= n_valid repeat
// the last valid one (their outputs are not stored).
template <int kG>
void group_row_offsets(int n_valid, int64_t w_row_bytes, int32_t (&row_off)[kG]) {
  for (int i = 0; i < kG; ++i)
    row_off[i] = static_cast<int32_t>((i < n_valid ? i : n_valid - 1) * w_row_bytes);
}
