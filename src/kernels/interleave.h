// Weights rearranged at load time into groups of 16 rows ("x16" layouts), the layout the fast
// kernels read (AVX-512 VNNI: x86/matmul_x16_avx512.cc; AVX2 and AVX-VNNI: x86/matmul_x16_avx2.cc,
// each half of a 64-byte vector in one 256-bit register), and the scalar row dots that define,
// output by output, what those kernels compute.
//
// Why another layout: the ggml block layout keeps one row's super-block together (scales packed in
// 6 bits, nibbles in 32-byte runs), so a kernel spends more instructions unpacking scales and
// reducing lanes than multiplying. Here a 64-byte vector holds 4 consecutive weights of each of 16
// rows; one vpdpbusd multiplies it with 4 broadcast activation bytes into 16 per-row sums, and
// after the 8 (Q4_K) or 4 (Q6_K) vectors of a sub-block every lane holds that row's exact integer
// sub-block sum, scaled by one vpmulld (AVX2 gets the same sums from vpmaddubsw + vpmaddwd, which
// also applies the scales). The scales are stored unpacked, one byte per row.
//
// The x16 order (how each output is computed; exact integers, then two or one float steps per
// super-block), with x rounded to Q8_K as llama.cpp does (dot_ggml_order.h):
//   Q4_K, Q5_K: T = sum_c sc[c] * sum_{i in sub-block c} q[i] * x[i]  (c < 8, 32 elements each;
//         q in 0..15 or 0..31)
//         M = sum_c m[c] * (bsums[2c] + bsums[2c + 1])
//         acc = fma(d * dx, float(T), acc); accm = fma(dmin * dx, float(M), accm)
//         result = acc - accm
//   Q6_K: T = sum_s sc[s] * (sum_{i in sub-block s} q[i] * x[i] - 32 * bsums[s])  (q in 0..63)
//         acc = fma(d * dx, float(T), acc); result = acc
//   Q8_0 (x rounded to Q8_0 per block of 32): acc = fma(d * dx, float(sum q[i] * x[i]), acc)
// This is not llama.cpp's float order (8 float lanes per super-block): it rounds fewer times, and
// moves the tiny golden models' logits within their thresholds (docs/numerics.md has the figures).
// Every batch size uses it, so a row's result never depends on its batch.
// Q5_K kept llama.cpp's order until session 8 (on the Q5_K_M golden file any other rounding lands
// above 0.02 from llama.cpp's logits); judged by the exact rule, the x16 order is as close to the
// exact computation as llama.cpp's (docs/numerics.md), so it runs the x16 order too.
// Depends on gguf (GgmlType), quant/blocks.h and kernels/matmul.h.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"
#include "kernels/matmul.h"
#include "quant/blocks.h"

namespace ponder {

inline constexpr int kX16Rows = 16;

// One super-block (256 elements) of 16 Q4_K rows; 2368 bytes (148 per row, 144 in ggml).
struct BlockQ4KX16 {
  // qs[p][k][j][t] = byte 32p + 4k + t of row j's qs: its low nibble is element 64p + 4k + t
  // (sub-block 2p), its high nibble element 64p + 32 + 4k + t (sub-block 2p + 1).
  uint8_t qs[4][8][kX16Rows][4];
  uint8_t scales[8][kX16Rows];   // [sub-block][row], 6-bit
  uint8_t mins[4][kX16Rows][2];  // [pair p][row][sub-block 2p + h], 6-bit
  uint16_t d[kX16Rows];          // f16
  uint16_t dmin[kX16Rows];       // f16
};
static_assert(sizeof(BlockQ4KX16) == 2368 && sizeof(BlockQ4KX16) % 64 == 0);

// One super-block of 16 Q5_K rows; 2880 bytes (180 per row, 176 in ggml), by lanes l (l < 8):
// lane l holds elements 4l .. 4l + 3 of every sub-block, 4 vectors with bits 0-3 of its codes and
// one with bit 4 of them (a sub-block's sum is one vpdpbusd per lane). The 5-bit codes are put
// together in registers (a shift and two masks per 64 codes) rather than stored one per byte:
// decode streams the weights from memory, so the copy keeps ggml's ~5.5 bits per weight.
struct BlockQ5KX16 {
  // q[l][v][j][t], v < 4: byte 32v + 4l + t of row j's qs; its low nibble is bits 0-3 of element
  // 64v + 4l + t (sub-block 2v), its high nibble of element 64v + 32 + 4l + t (sub-block 2v + 1).
  // q[l][4][j][t]: byte 4l + t of row j's qh; its bit c is bit 4 of element 32c + 4l + t.
  uint8_t q[8][5][kX16Rows][4];
  uint8_t scales[8][kX16Rows];   // as BlockQ4KX16
  uint8_t mins[4][kX16Rows][2];  // as BlockQ4KX16
  uint16_t d[kX16Rows];          // f16
  uint16_t dmin[kX16Rows];       // f16
};
static_assert(sizeof(BlockQ5KX16) == 2880 && sizeof(BlockQ5KX16) % 64 == 0);

// One super-block of 16 Q6_K rows; 3392 bytes (212 per row, 210 in ggml).
struct BlockQ6KX16 {
  // q[s][v][j][t] for sub-block s (elements 16s .. 16s + 15), plane v < 3, row j: bits 0-5 hold
  // the 6-bit code (0..63) of element 16s + 4v + t, bits 6-7 bits 2v, 2v + 1 of the code of
  // element 16s + 12 + t.
  uint8_t q[16][3][kX16Rows][4];
  int8_t scales[16][kX16Rows];  // [sub-block][row]
  float d[kX16Rows];
};
static_assert(sizeof(BlockQ6KX16) == 3392 && sizeof(BlockQ6KX16) % 64 == 0);

// Two blocks (64 elements) of 16 Q8_0 rows; 1088 bytes (34 per row, as in ggml).
struct BlockQ80X16 {
  uint8_t qs[2][8][kX16Rows][4];  // [block][k][row][t]: code of element 32 * block + 4k + t, + 128
  uint16_t d[2][kX16Rows];        // f16
};
static_assert(sizeof(BlockQ80X16) == 1088 && sizeof(BlockQ80X16) % 64 == 0);

// Whether weights of this type and shape have an x16 layout (Q4_K, Q5_K, Q6_K, Q8_0; n_out a
// multiple of 16, n_in of 256 or, for Q8_0, 64).
bool x16_supported(GgmlType type, int64_t n_out, int64_t n_in);

// Bytes of the x16 copy of w (a multiple of 64).
int64_t x16_bytes(const WeightView& w);

// Writes groups [g_begin, g_end) of 16 rows of w (ggml layout) into dst, the x16 copy's start
// (64-byte aligned). Group g holds rows 16g .. 16g + 15, its super-blocks in order.
void x16_interleave(const WeightView& w, int64_t g_begin, int64_t g_end, uint8_t* dst);

// The scalar x16-order dots of a ggml-layout weight row with a Q8_K activation row.
float dot_q4_K_x16_order(const void* w_row, const void* x_row, int64_t n);
float dot_q5_K_x16_order(const void* w_row, const void* x_row, int64_t n);
float dot_q6_K_x16_order(const void* w_row, const void* x_row, int64_t n);
// The same for Q8_0 weights and a Q8_0 activation row.
float dot_q8_0_x16_order(const void* w_row, const void* x_row, int64_t n);

}  // namespace ponder
