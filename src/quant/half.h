// Scalar conversions between float and the two 16-bit float formats of GGUF files:
// IEEE binary16 ("F16") and bfloat16 ("BF16"), both held as raw uint16_t bits.
// float -> F16 and float -> BF16 round to nearest, ties to even (what hardware F16C and ggml do);
// NaN stays NaN (made quiet), infinities stay infinite, F16 subnormals are produced and read.
// BF16 subnormals are kept as they are (no flush to zero), as ggml does.
// Header-only and depends on nothing but the standard library; the SIMD kernels have their own.
#pragma once

#include <bit>
#include <cstdint>

namespace ponder {

inline float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));  // inf, NaN
  // Rebias the exponent from 15 to 127.
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t fp32_to_fp16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN: keep the top payload bits, force the quiet bit
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  }
  // 65520 (0x477ff000) is the midpoint between 65504 (the largest half) and 65536: ties to even
  // round it up, so everything from there on (inf included) becomes inf.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias the exponent (-112 << 23) and round the 13 dropped mantissa
    // bits to nearest even; a carry out of the mantissa correctly bumps the exponent.
    const uint32_t odd = (ax >> 13) & 1u;
    const uint32_t r = ax - (112u << 23) + 0xfffu + odd;
    return static_cast<uint16_t>(sign | (r >> 13));
  }
  // Subnormal half or zero: the result is round(|f| / 2^-24).
  const uint32_t e = ax >> 23;
  if (e < 102) return sign;  // below 2^-25 (2^-25 itself is a tie and goes to the even 0)
  const uint32_t m = (ax & 0x7fffffu) | 0x800000u;  // |f| = m * 2^(e - 150)
  const uint32_t shift = 126 - e;                   // 14..24
  uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // may reach 0x400, the smallest normal
  return static_cast<uint16_t>(sign | q);
}

inline float bf16_to_fp32(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

inline uint16_t fp32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  // Round to nearest even on the 16 dropped bits; overflow past the largest bf16 gives inf.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// F16 values used as scales are rounded through the format; this is what a stored scale reads as.
inline float round_through_fp16(float f) { return fp16_to_fp32(fp32_to_fp16(f)); }

}  // namespace ponder
