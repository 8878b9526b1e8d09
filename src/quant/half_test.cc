#include "quant/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace ponder {
namespace {

bool is_nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }

TEST(Half, EveryF16RoundTripsExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = fp16_to_fp32(h);
    if (is_nan16(h)) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      const uint16_t back = fp32_to_fp16(f);
      EXPECT_TRUE(is_nan16(back)) << bits;
      EXPECT_EQ(back, h | 0x0200) << "NaN payload kept, made quiet: " << bits;
      continue;
    }
    EXPECT_EQ(fp32_to_fp16(f), h) << bits;
  }
}

TEST(Half, EveryBF16RoundTripsExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto h = static_cast<uint16_t>(bits);
    const float f = bf16_to_fp32(h);
    if (std::isnan(f)) {
      EXPECT_EQ(fp32_to_bf16(f), h | 0x40) << bits;
      continue;
    }
    EXPECT_EQ(fp32_to_bf16(f), h) << bits;
  }
}

TEST(Half, KnownF16Values) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xc000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // the tie rounds to even: infinity
  EXPECT_EQ(fp32_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(fp32_to_fp16(0x1p-14f), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(0x1p-24f), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(0x1p-25f), 0x0000);  // tie between 0 and 2^-24: even
  EXPECT_EQ(fp32_to_fp16(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(fp32_to_fp16(0x3p-25f), 0x0002);  // 1.5 * 2^-24: tie, to even 2
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);  // tie: to even
  EXPECT_EQ(fp32_to_fp16(1.0f + 0x3p-11f), 0x3c02);  // tie: to even (up)
  EXPECT_EQ(fp32_to_fp16(0x1.ffcp-15f), 0x0400);     // largest subnormal + half ulp -> normal
  EXPECT_TRUE(is_nan16(fp32_to_fp16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(is_nan16(fp32_to_fp16(std::numeric_limits<float>::signaling_NaN())));
  EXPECT_FLOAT_EQ(fp16_to_fp32(0x0001), 0x1p-24f);
  EXPECT_FLOAT_EQ(fp16_to_fp32(0x83ff), -0x3ffp-24f);
}

// For random floats over the whole F16 range, the result is the nearest F16, ties to even.
TEST(Half, F16RoundsToNearestEven) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
  int checked = 0;
  while (checked < 200000) {
    const float f = std::bit_cast<float>(bits(rng) & 0x8fffffffu);  // exponents up to ~2^16
    if (!std::isfinite(f) || std::fabs(f) >= 65520.0f) continue;
    ++checked;
    const uint16_t h = fp32_to_fp16(f);
    const double err = std::fabs(static_cast<double>(fp16_to_fp32(h)) - f);
    for (int delta : {-1, 1}) {
      const uint16_t mag = h & 0x7fff;
      if ((delta < 0 && mag == 0) || (delta > 0 && mag == 0x7bff)) continue;
      const auto other = static_cast<uint16_t>((h & 0x8000) | (mag + delta));
      const double other_err = std::fabs(static_cast<double>(fp16_to_fp32(other)) - f);
      ASSERT_LE(err, other_err) << f;
      if (err == other_err) {
        ASSERT_EQ(h & 1, 0) << "tie not to even: " << f;
      }
    }
  }
}

TEST(Half, BF16RoundsToNearestEven) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);  // tie, to even (down)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // tie, to even (up)
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00000001u)), 0x0000);  // subnormal, rounded
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormals kept
  EXPECT_EQ(fp32_to_bf16(std::bit_cast<float>(0x7f7fffffu)), 0x7f80);  // overflow to inf
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(std::bit_cast<float>(0x7f800001u)))));
}

}  // namespace
}  // namespace ponder
