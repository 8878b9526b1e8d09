// The block formats of GGUF tensor data, as plain structs whose layout is the file format's
// (ggml's ggml-common.h is the spec): every field, its order and the struct size must match byte
// for byte, since tensors are used in place from the memory-mapped file. F16 scales are raw
// uint16_t bits (see half.h). Element order inside each block is documented beside the struct;
// the scalar reference code in quant_legacy.cc / quant_k.cc is the executable definition.
// Depends on nothing but the standard library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ponder {

inline constexpr int kQK = 32;          // elements per block of the legacy formats (Q4_0 ... Q8_0)
inline constexpr int kQK_K = 256;       // elements per super-block of the K formats
inline constexpr int kKScaleSize = 12;  // packed 6-bit scales + mins of Q4_K / Q5_K

// x = d * (q - 8), q in 0..15. qs[j] holds element j (low nibble) and element j + 16 (high).
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// x = d * q + m, q in 0..15; nibble order as Q4_0.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// x = d * (q - 16), q in 0..31: low 4 bits as Q4_0, bit 4 of element j is bit j of qh (LE u32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// x = d * q + m, q in 0..31; bits as Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// x = d * q, q in -127..127 (quantize never writes -128).
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// 16 sub-blocks of 16: x = d * (scales[s] & 15) * q - dmin * (scales[s] >> 4), q in 0..3.
// Element 128 * h + 32 * k + l (h < 2, k < 4, l < 32) is bits 2k..2k+1 of qs[32 h + l];
// its sub-block is s = 8 h + 2 k + l / 16.
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84);

// 16 sub-blocks of 16: x = d * (sc[s] - 32) * (q - 4), q in 0..7, sc 6-bit.
// Low 2 bits of q as Q2_K's qs; bit 2 of element 32 b + l (b < 8) is bit b of hmask[l].
// sc[s]: low 4 bits in scales[s] (s < 8) or the high nibble of scales[s - 8]; high 2 bits are
// bits 2 (s / 4) .. 2 (s / 4) + 1 of scales[8 + s % 4].
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110);

// 8 sub-blocks of 32: x = d * sc[s] * q - dmin * m[s], q in 0..15, sc and m 6-bit, packed in
// scales[12] (see get_scale_min_k4 in quant_k.cc). Element 64 p + l (l < 32) is the low nibble of
// qs[32 p + l], element 64 p + 32 + l its high nibble.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// As Q4_K with q in 0..31: bit 4 of element 64 p + l is bit 2p of qh[l], of element
// 64 p + 32 + l bit 2p + 1 of qh[l].
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleSize];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q in 0..63, s = element / 16.
// Element 128 h + 32 k + l (h < 2, k < 4, l < 32): low 4 bits in ql[64 h + 32 (k % 2) + l]
// (low nibble for k < 2, high nibble for k >= 2), top 2 bits in bits 2k..2k+1 of qh[32 h + l].
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Activations for the K-format dot products: x = d * q; bsums[g] = sum of qs[16 g .. 16 g + 15].
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

static_assert(alignof(BlockQ4_0) == 2 && alignof(BlockQ8_0) == 2 && alignof(BlockQ6_K) == 2);

}  // namespace ponder
