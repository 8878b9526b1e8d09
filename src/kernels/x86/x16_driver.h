// The driver of the x86 kernels for weights in the x16 layouts (kernels/interleave.h,
// x86/matmul_x16_avx2.cc and x86/matmul_x16_avx512.cc): per group of 16 weight rows, passes of up
// to kRows activation rows, each a call of the ISA's group kernel for that many rows (a
// compile-time R); the packed Q8_0 activation row both ISAs lay out alike; and the table of
// the four x16 kernels. Which rows share a pass only changes which outputs are computed together,
// never the float operations of one output (batch invariance).
//
// Included at the end of the anonymous namespace of those translation units (see
// x86/tile_driver.h for why nothing is shared inline), which define before it:
//   constexpr Isa kIsa;           // the ISA of the table entries
//   constexpr int kRows;          // activation rows per pass over a group's weights
//   constexpr int kQ80PairRows;   // > 0: Q8_0 groups go in pairs of up to this many rows
//   struct ActX16, ActX16Q80;     // packed activation blocks (pack_x16_row, pack_q8_0_pairs)
//   template <int R> void q4_K_group(const BlockQ4KX16* w, int64_t nb, const ActX16* const x[R],
//                                    float* y, int64_t y_stride);  // likewise q5_K_group,
//   // q6_K_group, q8_0_group (on ActX16Q80) and, where kQ80PairRows > 0, q8_0_group_pair(w0, w1,
//   // nb, x, y, y_stride) for the groups at w0 and w1 (outputs y[j], j < 32).
// Depends on <type_traits>, <cstring>, kernels/interleave.h, x86/q8_quantize_avx2.h (the Q8_K and
// Q8_0 quantizers) and x86/tile_driver.h (WeightView, MatmulKernel), included before it.
#pragma once

template <class Act, int kElems>
int64_t x16_packed_row_bytes(int64_t n_in) {
  return n_in / kElems * static_cast<int64_t>(sizeof(Act));
}

// Q8_K activations, a super-block to an Act: the quants, the scale, the sums of 32 quants
// (sums32, Q4_K / Q5_K's mins) and Q6_K's offset term, as the sums of 16 (bsums) or as the start
// values of a sub-block's sum that undo the codes' offset of 32 (q6_start = -32 * bsums).
template <class Act>
void pack_x16_row(const float* x, void* dst, int64_t n_in) {
  Act* a = static_cast<Act*>(dst);
  for (int64_t b = 0; b < n_in / kQK_K; ++b) {
    BlockQ8_K q;
    quantize_block_q8_K_avx2(x + b * kQK_K, &q.d, q.qs, q.bsums);
    std::memcpy(a[b].qs, q.qs, kQK_K);
    if constexpr (requires { a[b].bsums; }) {
      std::memcpy(a[b].bsums, q.bsums, sizeof(a[b].bsums));
    } else {
      for (int s = 0; s < 16; ++s) a[b].q6_start[s] = -32 * q.bsums[s];
    }
    for (int c = 0; c < 8; ++c)
      a[b].sums32[c] = static_cast<int16_t>(q.bsums[2 * c] + q.bsums[2 * c + 1]);
    a[b].d = q.d;
  }
}

// Q8_0 activations: blocks of 32 quantized as the reference does, two to an Act (quants and
// scales as floats), and where Act has them the start values -128 * each block's sum that undo
// the weights' stored + 128 (vpdpbusd's unsigned codes).
template <class Act>
void pack_q8_0_pairs(const float* x, void* dst, int64_t n_in) {
  Act* a = static_cast<Act*>(dst);
  for (int64_t b = 0; b < n_in / kQK; ++b) {
    BlockQ8_0 q;
    quantize_block_q8_0_avx2(x + b * kQK, &q.d, q.qs);
    Act& out = a[b / 2];
    const int h = static_cast<int>(b % 2);
    std::memcpy(out.qs + 32 * h, q.qs, kQK);
    if constexpr (requires { out.start; }) {
      int32_t sum = 0;
      for (int i = 0; i < kQK; ++i) sum += q.qs[i];
      out.start[h] = -128 * sum;
    }
    out.d[h] = _cvtsh_ss(q.d);
  }
}

// f.template operator()<R>() with R = rr, 1 <= rr <= kMax, as a compile-time constant.
template <int kMax, class F>
void with_rows(int rr, const F& f) {
  if constexpr (kMax == 1) {
    f.template operator()<1>();
  } else if (rr == kMax) {
    f.template operator()<kMax>();
  } else {
    with_rows<kMax - 1>(rr, f);
  }
}

// Passes of up to kMax activation rows (of nb blocks each, from x) over one group's weights:
// f.template operator()<R>(rows, yr) with R the pass's rows and yr its outputs (from yg).
template <int kMax, class Act, class F>
void row_passes(const Act* x, int64_t nb, int64_t n_rows, float* yg, int64_t y_stride, const F& f) {
  for (int64_t r = 0; r < n_rows; r += kMax) {
    const Act* rows[kMax];
    const int rr = static_cast<int>(n_rows - r < kMax ? n_rows - r : kMax);
    for (int i = 0; i < rr; ++i) rows[i] = x + (r + i) * nb;
    float* yr = yg + r * y_stride;
    with_rows<kMax>(rr, [&]<int R>() { f.template operator()<R>(rows, yr); });
  }
}

// The group kernel of weights in Block's layout, for R activation rows. Never inlined into
// gemm_x16 (the group kernel is inlined here instead): one function per kernel and R, as GCC laid
// the kernels out before this header, with their registers to themselves.
template <int R, class Block, class Act>
[[gnu::noinline]] void run_group(const Block* w, int64_t nb, const Act* const* x, float* y,
                                 int64_t y_stride) {
  if constexpr (std::is_same_v<Block, BlockQ4KX16>) {
    q4_K_group<R>(w, nb, x, y, y_stride);
  } else if constexpr (std::is_same_v<Block, BlockQ5KX16>) {
    q5_K_group<R>(w, nb, x, y, y_stride);
  } else if constexpr (std::is_same_v<Block, BlockQ6KX16>) {
    q6_K_group<R>(w, nb, x, y, y_stride);
  } else {
    q8_0_group<R>(w, nb, x, y, y_stride);
  }
}

// q8_0_group_pair for R activation rows, likewise never inlined into gemm_x16.
template <int R, class Act>
[[gnu::noinline]] void run_group_pair(const BlockQ80X16* w, int64_t nb, const Act* const* x,
                                      float* y, int64_t y_stride) {
  q8_0_group_pair<R>(w, w + nb, nb, x, y, y_stride);
}

// MatmulKernel::gemm on w.x16: groups of 16 rows, o_begin and o_end multiples of 16. With
// kPairRows > 0, pairs of groups (32 output rows, twice the accumulators of one group) with up to
// kPairRows activation rows a pass first, a lone last group then on its own: bitwise the results
// of single groups, as each output's operations are the same.
template <class Block, class Act, int kElems, int kPairRows = 0>
void gemm_x16(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin, int64_t o_end,
              float* y, int64_t y_stride) {
  const int64_t nb = w.n_in / kElems;
  const Block* blocks = static_cast<const Block*>(w.x16);
  const Act* x = static_cast<const Act*>(xp);
  int64_t g = o_begin / kX16Rows;
  const int64_t g_end = o_end / kX16Rows;
  if constexpr (kPairRows > 0) {
    for (; g + 2 <= g_end; g += 2) {
      const Block* wg = blocks + g * nb;
      row_passes<kPairRows>(x, nb, n_rows, y + g * kX16Rows, y_stride,
                            [&]<int R>(const Act* const* rows, float* yr) {
                              run_group_pair<R>(wg, nb, rows, yr, y_stride);
                            });
    }
  }
  for (; g < g_end; ++g) {
    const Block* wg = blocks + g * nb;
    row_passes<kRows>(x, nb, n_rows, y + g * kX16Rows, y_stride,
                      [&]<int R>(const Act* const* rows, float* yr) {
                        run_group<R>(wg, nb, rows, yr, y_stride);
                      });
  }
}

// The kernels' names: "q4_K_x16_" and the ISA.
constexpr const char* x16_name(const char* avx2, const char* avxvnni, const char* avx512) {
  return kIsa == Isa::kAvx2 ? avx2 : kIsa == Isa::kAvxVnni ? avxvnni : avx512;
}

constexpr MatmulKernel kKernels[] = {
    {GgmlType::Q4_K, kIsa, x16_name("q4_K_x16_avx2", "q4_K_x16_avxvnni", "q4_K_x16_avx512"),
     x16_packed_row_bytes<ActX16, kQK_K>, pack_x16_row<ActX16>,
     gemm_x16<BlockQ4KX16, ActX16, kQK_K>, true},
    {GgmlType::Q5_K, kIsa, x16_name("q5_K_x16_avx2", "q5_K_x16_avxvnni", "q5_K_x16_avx512"),
     x16_packed_row_bytes<ActX16, kQK_K>, pack_x16_row<ActX16>,
     gemm_x16<BlockQ5KX16, ActX16, kQK_K>, true},
    {GgmlType::Q6_K, kIsa, x16_name("q6_K_x16_avx2", "q6_K_x16_avxvnni", "q6_K_x16_avx512"),
     x16_packed_row_bytes<ActX16, kQK_K>, pack_x16_row<ActX16>,
     gemm_x16<BlockQ6KX16, ActX16, kQK_K>, true},
    {GgmlType::Q8_0, kIsa, x16_name("q8_0_x16_avx2", "q8_0_x16_avxvnni", "q8_0_x16_avx512"),
     x16_packed_row_bytes<ActX16Q80, 64>, pack_q8_0_pairs<ActX16Q80>,
     gemm_x16<BlockQ80X16, ActX16Q80, 64, kQ80PairRows>, true},
};
