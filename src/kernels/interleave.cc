#include "kernels/interleave.h"

#include <cmath>
#include <cstring>

#include "quant/half.h"
#include "quant/quant_rows.h"

namespace ponder {
namespace {

// The 6-bit codes (0..63) of one Q6_K super-block, element order.
void q6_K_codes(const BlockQ6_K& b, uint8_t q[kQK_K]) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    uint8_t* out = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      out[l] = static_cast<uint8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
      out[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
      out[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
      out[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
    }
  }
}

// The header Q4_K and Q5_K blocks share (d, dmin, the packed 6-bit scales and mins) of row j's
// block `in`, unpacked into lane j of out.
template <class Block, class X16>
void interleave_k4_header(const Block& in, int j, X16& out) {
  for (int c = 0; c < 8; ++c) {
    uint8_t sc, m;
    get_scale_min_k4(c, in.scales, &sc, &m);
    out.scales[c][j] = sc;
    out.mins[c / 2][j][c % 2] = m;
  }
  out.d[j] = in.d;
  out.dmin[j] = in.dmin;
}

void interleave_q4_K(const BlockQ4_K* const rows[kX16Rows], int64_t b, BlockQ4KX16& out) {
  for (int j = 0; j < kX16Rows; ++j) {
    const BlockQ4_K& in = rows[j][b];
    for (int p = 0; p < 4; ++p) {
      for (int k = 0; k < 8; ++k) std::memcpy(out.qs[p][k][j], in.qs + 32 * p + 4 * k, 4);
    }
    interleave_k4_header(in, j, out);
  }
}

// Q4_K's qs bytes and ggml's qh bytes, regrouped by lane; scales and mins as Q4_K's (the blocks
// share their header).
void interleave_q5_K(const BlockQ5_K* const rows[kX16Rows], int64_t b, BlockQ5KX16& out) {
  for (int j = 0; j < kX16Rows; ++j) {
    const BlockQ5_K& in = rows[j][b];
    for (int l = 0; l < 8; ++l) {
      for (int v = 0; v < 4; ++v) std::memcpy(out.q[l][v][j], in.qs + 32 * v + 4 * l, 4);
      std::memcpy(out.q[l][4][j], in.qh + 4 * l, 4);
    }
    interleave_k4_header(in, j, out);
  }
}

void interleave_q6_K(const BlockQ6_K* const rows[kX16Rows], int64_t b, BlockQ6KX16& out) {
  for (int j = 0; j < kX16Rows; ++j) {
    const BlockQ6_K& in = rows[j][b];
    uint8_t q[kQK_K];
    q6_K_codes(in, q);
    for (int s = 0; s < 16; ++s) {
      for (int v = 0; v < 3; ++v) {
        for (int t = 0; t < 4; ++t) {
          const int top = (q[16 * s + 12 + t] >> (2 * v)) & 3;
          out.q[s][v][j][t] = static_cast<uint8_t>(q[16 * s + 4 * v + t] | (top << 6));
        }
      }
      out.scales[s][j] = in.scales[s];
    }
    out.d[j] = fp16_to_fp32(in.d);
  }
}

// Block pair b (elements 64b .. 64b + 63) of 16 rows.
void interleave_q8_0(const BlockQ8_0* const rows[kX16Rows], int64_t b, BlockQ80X16& out) {
  for (int j = 0; j < kX16Rows; ++j) {
    for (int h = 0; h < 2; ++h) {
      const BlockQ8_0& in = rows[j][2 * b + h];
      for (int k = 0; k < 8; ++k) {
        for (int t = 0; t < 4; ++t)
          out.qs[h][k][j][t] = static_cast<uint8_t>(in.qs[4 * k + t] + 128);
      }
      out.d[h][j] = in.d;
    }
  }
}

template <class In, class Out, class Fn>
void interleave_groups(const WeightView& w, int64_t g_begin, int64_t g_end, uint8_t* dst, Fn fn,
                       int64_t block_elements = kQK_K) {
  const int64_t nb = w.n_in / block_elements;
  Out* out = reinterpret_cast<Out*>(dst);
  for (int64_t g = g_begin; g < g_end; ++g) {
    const In* rows[kX16Rows];
    for (int j = 0; j < kX16Rows; ++j)
      rows[j] = reinterpret_cast<const In*>(w.row(g * kX16Rows + j));
    for (int64_t b = 0; b < nb; ++b) fn(rows, b, out[g * nb + b]);
  }
}

}  // namespace

bool x16_supported(GgmlType type, int64_t n_out, int64_t n_in) {
  if (n_out <= 0 || n_out % kX16Rows != 0 || n_in <= 0) return false;
  switch (type) {
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return n_in % kQK_K == 0;
    case GgmlType::Q8_0:
      return n_in % 64 == 0;
    default:
      return false;
  }
}

int64_t x16_bytes(const WeightView& w) {
  const int64_t groups = w.n_out / kX16Rows;
  const int64_t super_blocks = groups * (w.n_in / kQK_K);
  switch (w.type) {
    case GgmlType::Q4_K:
      return super_blocks * static_cast<int64_t>(sizeof(BlockQ4KX16));
    case GgmlType::Q5_K:
      return super_blocks * static_cast<int64_t>(sizeof(BlockQ5KX16));
    case GgmlType::Q6_K:
      return super_blocks * static_cast<int64_t>(sizeof(BlockQ6KX16));
    default:
      return groups * (w.n_in / 64) * static_cast<int64_t>(sizeof(BlockQ80X16));
  }
}

void x16_interleave(const WeightView& w, int64_t g_begin, int64_t g_end, uint8_t* dst) {
  if (w.type == GgmlType::Q4_K) {
    interleave_groups<BlockQ4_K, BlockQ4KX16>(w, g_begin, g_end, dst, interleave_q4_K);
  } else if (w.type == GgmlType::Q5_K) {
    interleave_groups<BlockQ5_K, BlockQ5KX16>(w, g_begin, g_end, dst, interleave_q5_K);
  } else if (w.type == GgmlType::Q6_K) {
    interleave_groups<BlockQ6_K, BlockQ6KX16>(w, g_begin, g_end, dst, interleave_q6_K);
  } else {
    interleave_groups<BlockQ8_0, BlockQ80X16>(w, g_begin, g_end, dst, interleave_q8_0, 64);
  }
}

namespace {

// The x16 order of the K-quants with 8 sub-blocks of 32 and 6-bit scales and mins (Q4_K, Q5_K):
// code(block, c, i) is the unsigned code of element i of sub-block c.
template <class Block, class Code>
float dot_scale_min_x16_order(const void* w_row, const void* x_row, int64_t n, Code code) {
  const Block* w = static_cast<const Block*>(w_row);
  const BlockQ8_K* x = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f, accm = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t t = 0, m_sum = 0;
    for (int c = 0; c < 8; ++c) {
      uint8_t sc, m;
      get_scale_min_k4(c, w[b].scales, &sc, &m);
      const int8_t* xq = x[b].qs + 32 * c;
      int32_t s = 0;
      for (int i = 0; i < 32; ++i) s += code(w[b], c, i) * xq[i];
      t += sc * s;
      m_sum += m * (x[b].bsums[2 * c] + x[b].bsums[2 * c + 1]);
    }
    acc = std::fma(fp16_to_fp32(w[b].d) * x[b].d, static_cast<float>(t), acc);
    accm = std::fma(fp16_to_fp32(w[b].dmin) * x[b].d, static_cast<float>(m_sum), accm);
  }
  return acc - accm;
}

}  // namespace

float dot_q4_K_x16_order(const void* w_row, const void* x_row, int64_t n) {
  return dot_scale_min_x16_order<BlockQ4_K>(w_row, x_row, n, [](const BlockQ4_K& b, int c, int i) {
    return (b.qs[32 * (c / 2) + i] >> (4 * (c % 2))) & 0xF;
  });
}

float dot_q5_K_x16_order(const void* w_row, const void* x_row, int64_t n) {
  return dot_scale_min_x16_order<BlockQ5_K>(w_row, x_row, n, [](const BlockQ5_K& b, int c, int i) {
    return ((b.qs[32 * (c / 2) + i] >> (4 * (c % 2))) & 0xF) | (((b.qh[i] >> c) & 1) << 4);
  });
}

float dot_q6_K_x16_order(const void* w_row, const void* x_row, int64_t n) {
  const BlockQ6_K* w = static_cast<const BlockQ6_K*>(w_row);
  const BlockQ8_K* x = static_cast<const BlockQ8_K*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t q[kQK_K];
    q6_K_codes(w[b], q);
    int32_t t = 0;
    for (int s = 0; s < 16; ++s) {
      int32_t sum = -32 * x[b].bsums[s];
      for (int i = 16 * s; i < 16 * s + 16; ++i) sum += q[i] * x[b].qs[i];
      t += w[b].scales[s] * sum;
    }
    acc = std::fma(fp16_to_fp32(w[b].d) * x[b].d, static_cast<float>(t), acc);
  }
  return acc;
}

float dot_q8_0_x16_order(const void* w_row, const void* x_row, int64_t n) {
  const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
  const BlockQ8_0* x = static_cast<const BlockQ8_0*>(x_row);
  float acc = 0.0f;
  for (int64_t b = 0; b < n / kQK; ++b) {
    int32_t s = 0;
    for (int i = 0; i < kQK; ++i) s += w[b].qs[i] * x[b].qs[i];
    acc = std::fma(fp16_to_fp32(w[b].d) * fp16_to_fp32(x[b].d), static_cast<float>(s), acc);
  }
  return acc;
}

}  // namespace ponder
