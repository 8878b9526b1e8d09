// AVX-512 versions of attention's f16 dots, bit for bit the scalar reference's order
// (dot_ggml_order.cc): four 16-lane accumulators with fused multiply-adds, combined as
// (acc0 + acc2) + (acc1 + acc3), then GCC's _mm512_reduce_add_ps order, leftovers in double.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace ponder {
namespace {

inline __m512 load_f16x16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

inline float half_to_float(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

// t8[l] = a[l + 8] + a[l]; t4[l] = t8[l + 4] + t8[l]; (t4[0] + t4[2]) + (t4[1] + t4[3]).
inline float reduce16(__m512 a) {
  const __m256 t8 = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
  const __m128 t4 = _mm_add_ps(_mm256_extractf128_ps(t8, 1), _mm256_castps256_ps128(t8));
  alignas(16) float t[4];
  _mm_store_ps(t, t4);
  return (t[0] + t[2]) + (t[1] + t[3]);
}

}  // namespace

float dot_f16_ggml_avx512(const uint16_t* x, const uint16_t* y, int64_t n) {
  const int64_t np = n & ~int64_t{63};
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  __m512 acc2 = _mm512_setzero_ps(), acc3 = _mm512_setzero_ps();
  for (int64_t i = 0; i < np; i += 64) {
    acc0 = _mm512_fmadd_ps(load_f16x16(x + i), load_f16x16(y + i), acc0);
    acc1 = _mm512_fmadd_ps(load_f16x16(x + i + 16), load_f16x16(y + i + 16), acc1);
    acc2 = _mm512_fmadd_ps(load_f16x16(x + i + 32), load_f16x16(y + i + 32), acc2);
    acc3 = _mm512_fmadd_ps(load_f16x16(x + i + 48), load_f16x16(y + i + 48), acc3);
  }
  const __m512 a = _mm512_add_ps(_mm512_add_ps(acc0, acc2), _mm512_add_ps(acc1, acc3));
  double sum = reduce16(a);
  for (int64_t e = np; e < n; ++e)
    sum += static_cast<double>(half_to_float(x[e]) * half_to_float(y[e]));
  return static_cast<float>(sum);
}

namespace {

// Lane l's accumulators for columns [i0, i0 + 16 C) kept in registers while its positions
// p = p0, p0 + 64, ... < p_end (the chain of fma that lane's dot does) go by.
template <int C>
void accumulate_lane(const uint16_t* const* rows, const uint16_t* probs, int64_t p0, int64_t p_end,
                     float* a, int64_t i0) {
  __m512 acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_loadu_ps(a + i0 + 16 * c);
  for (int64_t p = p0; p < p_end; p += 64) {
    const __m512 w = _mm512_set1_ps(half_to_float(probs[p]));
    const uint16_t* v = rows[p] + i0;
    for (int c = 0; c < C; ++c) acc[c] = _mm512_fmadd_ps(load_f16x16(v + 16 * c), w, acc[c]);
  }
  for (int c = 0; c < C; ++c) _mm512_storeu_ps(a + i0 + 16 * c, acc[c]);
}

}  // namespace

// Lane by lane rather than position by position: each lane's accumulators stay in registers
// over its positions instead of a load and a store per position (the same fma chains, so the
// same bits).
void accumulate_rows_f16_avx512(const uint16_t* const* rows, const uint16_t* probs, int64_t p_begin,
                                int64_t p_end, int64_t dim, float* acc) {
  if (p_end <= p_begin) return;
  const int64_t dim16 = dim & ~int64_t{15};
  for (int64_t l = 0; l < 64; ++l) {
    // The first position of lane l at or after p_begin.
    const int64_t p0 = p_begin + ((l - p_begin % 64) % 64 + 64) % 64;
    if (p0 >= p_end) continue;
    float* a = acc + l * dim;
    int64_t i = 0;
    for (; i + 128 <= dim16; i += 128) accumulate_lane<8>(rows, probs, p0, p_end, a, i);
    for (; i < dim16; i += 16) accumulate_lane<1>(rows, probs, p0, p_end, a, i);
    for (; i < dim; ++i) {
      float s = a[i];
      for (int64_t p = p0; p < p_end; p += 64)
        s = __builtin_fmaf(half_to_float(rows[p][i]), half_to_float(probs[p]), s);
      a[i] = s;
    }
  }
}

void reduce_lanes_f16_avx512(const float* acc, int64_t dim, float* out) {
  // Per column: lanes[l] = (acc[l] + acc[32 + l]) + (acc[16 + l] + acc[48 + l]), then reduce16
  // over l; done for 16 columns at once, the same additions in the same order (the last columns
  // masked: lanes past dim are neither read nor stored).
  for (int64_t i = 0; i < dim; i += 16) {
    const __mmask16 m =
        dim - i >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (dim - i)) - 1);
    __m512 lanes[16];
    for (int l = 0; l < 16; ++l) {
      const __m512 a0 = _mm512_maskz_loadu_ps(m, acc + l * dim + i);
      const __m512 a2 = _mm512_maskz_loadu_ps(m, acc + (32 + l) * dim + i);
      const __m512 a1 = _mm512_maskz_loadu_ps(m, acc + (16 + l) * dim + i);
      const __m512 a3 = _mm512_maskz_loadu_ps(m, acc + (48 + l) * dim + i);
      lanes[l] = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
    }
    __m512 t8[8], t4[4];
    for (int l = 0; l < 8; ++l) t8[l] = _mm512_add_ps(lanes[l + 8], lanes[l]);
    for (int l = 0; l < 4; ++l) t4[l] = _mm512_add_ps(t8[l + 4], t8[l]);
    _mm512_mask_storeu_ps(out + i, m,
                          _mm512_add_ps(_mm512_add_ps(t4[0], t4[2]), _mm512_add_ps(t4[1], t4[3])));
  }
}

void weighted_rows_f16_ggml_avx512(const uint16_t* const* rows, const uint16_t* probs, int64_t n,
                                   int64_t dim, float* out, float* scratch) {
  std::fill(scratch, scratch + 64 * dim, 0.0f);
  accumulate_rows_f16_avx512(rows, probs, 0, n, dim, scratch);
  reduce_lanes_f16_avx512(scratch, dim, out);
}

void scaled_to_f16_avx512(const float* x, float scale, uint16_t* y, int64_t n) {
  const __m512 s = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm512_cvtps_ph(_mm512_mul_ps(_mm512_loadu_ps(x + i), s),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), h);
  }
  for (; i < n; ++i)
    y[i] = static_cast<uint16_t>(_cvtss_sh(x[i] * scale, _MM_FROUND_TO_NEAREST_INT));
}

namespace {

// Up to 4 heads against one row: each head's 4 accumulators as dot_f16_ggml_avx512 has them.
template <int H>
void dot_heads(const uint16_t* x, const uint16_t* y, int64_t n, float* out) {
  const int64_t np = n & ~int64_t{63};
  __m512 acc[H][4];
  for (int h = 0; h < H; ++h) {
    for (int j = 0; j < 4; ++j) acc[h][j] = _mm512_setzero_ps();
  }
  for (int64_t i = 0; i < np; i += 64) {
    __m512 xv[4];
    for (int j = 0; j < 4; ++j) xv[j] = load_f16x16(x + i + 16 * j);
    for (int h = 0; h < H; ++h) {
      for (int j = 0; j < 4; ++j)
        acc[h][j] = _mm512_fmadd_ps(xv[j], load_f16x16(y + h * n + i + 16 * j), acc[h][j]);
    }
  }
  for (int h = 0; h < H; ++h) {
    const __m512 a =
        _mm512_add_ps(_mm512_add_ps(acc[h][0], acc[h][2]), _mm512_add_ps(acc[h][1], acc[h][3]));
    double sum = reduce16(a);
    const uint16_t* yh = y + h * n;
    for (int64_t e = np; e < n; ++e)
      sum += static_cast<double>(half_to_float(x[e]) * half_to_float(yh[e]));
    out[h] = static_cast<float>(sum);
  }
}

}  // namespace

void dot_f16_heads_avx512(const uint16_t* x, const uint16_t* y, int n_y, int64_t n, float* out) {
  int h = 0;
  for (; h + 4 <= n_y; h += 4) dot_heads<4>(x, y + h * n, n, out + h);
  switch (n_y - h) {
    case 3:
      dot_heads<3>(x, y + h * n, n, out + h);
      break;
    case 2:
      dot_heads<2>(x, y + h * n, n, out + h);
      break;
    case 1:
      dot_heads<1>(x, y + h * n, n, out + h);
      break;
    default:
      break;
  }
}

}  // namespace ponder
