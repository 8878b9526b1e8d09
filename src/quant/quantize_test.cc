#include "quant/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/blocks.h"
#include "quant/quant_rows.h"

namespace ponder {
namespace {

// A fixed standard-normal vector: splitmix64 -> Box-Muller in double -> float.
std::vector<float> gaussian(int64_t n, uint64_t seed) {
  uint64_t s = seed;
  auto next = [&s] {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  };
  auto uniform = [&] {
    return (static_cast<double>(next() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
  };
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; i += 2) {
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    x[i] = static_cast<float>(r * std::cos(6.283185307179586 * u2));
    if (i + 1 < n) x[i + 1] = static_cast<float>(r * std::sin(6.283185307179586 * u2));
  }
  return x;
}

double rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double se = 0.0;
  for (size_t i = 0; i < a.size(); ++i)
    se += (static_cast<double>(a[i]) - b[i]) * (static_cast<double>(a[i]) - b[i]);
  return std::sqrt(se / static_cast<double>(a.size()));
}

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}

std::vector<uint8_t> quantize(GgmlType type, const std::vector<float>& x) {
  std::vector<uint8_t> q(static_cast<size_t>(ggml_row_bytes(type, static_cast<int64_t>(x.size()))));
  quantize_row(type, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

std::vector<float> dequantize(GgmlType type, const std::vector<uint8_t>& q, int64_t n) {
  std::vector<float> y(n);
  dequantize_row(type, q.data(), y.data(), n);
  return y;
}

// llama.cpp's figures on the same data: gaussian(64 * 4096, seed 12345), quantized with
// ggml_quantize_chunk(type, x, q, 0, 64, 4096, /*imatrix=*/NULL) (Q8_K: quantize_row_q8_K_ref),
// dequantized with ggml's to_float, RMSE against x; ggml at commit d99724f2 (Aug 2026), built
// with GGML_NATIVE on this machine by a throwaway program outside the repo. `hash` is the FNV-1a
// of ggml's quantized bytes: our reference quantizers reproduce them bit for bit.
struct Reference {
  GgmlType type;
  double llama_rmse;
  uint64_t hash;
};
constexpr Reference kReference[] = {
    {GgmlType::F16, 0.000208395643, 0xbe0f77dfd8fbc171ULL},
    {GgmlType::BF16, 0.00166946871, 0x08f84a8045eb54a1ULL},
    {GgmlType::Q4_0, 0.0860516545, 0x1aae5e435094e4bfULL},
    {GgmlType::Q4_1, 0.0784294553, 0x36e768fbbc8b99aeULL},
    {GgmlType::Q5_0, 0.04271373, 0x2683251d5647ce3eULL},
    {GgmlType::Q5_1, 0.0379585249, 0x10d3177b1012e00fULL},
    {GgmlType::Q8_0, 0.00536525441, 0xc7fe423568fa6681ULL},
    {GgmlType::Q2_K, 0.297894281, 0xd8819c977dfee7d7ULL},
    {GgmlType::Q3_K, 0.151125049, 0x156026e95807fc62ULL},
    {GgmlType::Q4_K, 0.0714180078, 0xa8ddf0ac3521fbf7ULL},
    {GgmlType::Q5_K, 0.0361700281, 0xa293420249e8ea8aULL},
    {GgmlType::Q6_K, 0.0177972636, 0x94e1f9404827d789ULL},
    {GgmlType::Q8_K, 0.00694527486, 0x4a39b7ef8fa2f2f9ULL},
};

class GaussianTest : public ::testing::TestWithParam<Reference> {
 protected:
  static const std::vector<float>& data() {
    static const std::vector<float> x = gaussian(64 * 4096, 12345);
    return x;
  }
};

TEST_P(GaussianTest, RmseNoWorseThanLlamaCpp) {
  const Reference& ref = GetParam();
  const std::vector<float>& x = data();
  const std::vector<float> y =
      dequantize(ref.type, quantize(ref.type, x), static_cast<int64_t>(x.size()));
  const double ours = rmse(x, y);
  EXPECT_LE(ours, ref.llama_rmse * 1.02) << ggml_type_name(ref.type);
  RecordProperty("rmse", std::to_string(ours));
}

TEST_P(GaussianTest, BytesMatchLlamaCpp) {
  const Reference& ref = GetParam();
  EXPECT_EQ(fnv1a(quantize(ref.type, data())), ref.hash) << ggml_type_name(ref.type);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, GaussianTest, ::testing::ValuesIn(kReference),
                         [](const auto& info) {
                           return std::string(ggml_type_name(info.param.type));
                         });

// Values that a format represents exactly survive another quantization round unchanged, for the
// formats whose quantizer derives the scale from the extreme value (the legacy ones, the 16-bit
// floats). The K formats search their scales, so a second round may pick other levels; there
// we require that it moves the values by a small fraction of the first round's error.
TEST(Quantize, RequantizingDequantizedDataIsStable) {
  const std::vector<float> x = gaussian(16 * 1024, 99);
  const int64_t n = static_cast<int64_t>(x.size());
  for (GgmlType t : {GgmlType::F16, GgmlType::BF16, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                     GgmlType::Q5_1, GgmlType::Q8_0}) {
    const std::vector<uint8_t> q1 = quantize(t, x);
    const std::vector<uint8_t> q2 = quantize(t, dequantize(t, q1, n));
    size_t n_diff = 0;
    for (size_t i = 0; i < q1.size(); ++i) n_diff += q1[i] != q2[i];
    EXPECT_EQ(n_diff, 0u) << ggml_type_name(t) << ": bytes changed by a second round";
  }
  // Q8_K keeps its scale as an unrounded float, so a second round may move it by an ulp.
  for (GgmlType t : {GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::Q8_K}) {
    const std::vector<float> y1 = dequantize(t, quantize(t, x), n);
    const std::vector<float> y2 = dequantize(t, quantize(t, y1), n);
    EXPECT_LE(rmse(y1, y2), 0.25 * rmse(x, y1)) << ggml_type_name(t);
  }
}

TEST(Quantize, ZeroRowsGiveZeros) {
  const std::vector<float> x(512, 0.0f);
  for (const Reference& ref : kReference) {
    const std::vector<float> y = dequantize(ref.type, quantize(ref.type, x), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << ggml_type_name(ref.type);
  }
}

TEST(Quantize, ConstantAndTinyRowsStayFinite) {
  for (float v : {1.0f, -3.5f, 1e-20f, 1e-30f}) {
    const std::vector<float> x(512, v);
    for (const Reference& ref : kReference) {
      const std::vector<float> y = dequantize(ref.type, quantize(ref.type, x), 512);
      for (float r : y) {
        ASSERT_TRUE(std::isfinite(r)) << ggml_type_name(ref.type) << " " << v;
        ASSERT_NEAR(r, v, std::fabs(v) * 0.2 + 1e-6) << ggml_type_name(ref.type) << " " << v;
      }
    }
  }
}

TEST(Quantize, Q8KBlockSums) {
  const std::vector<float> x = gaussian(1024, 5);
  std::vector<BlockQ8_K> q(4);
  quantize_row_q8_K(x.data(), q.data(), 1024);
  for (const BlockQ8_K& b : q) {
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += b.qs[16 * g + l];
      EXPECT_EQ(b.bsums[g], sum);
    }
  }
}

// The documented element layouts of blocks.h: a level written at element i reads back at i.
TEST(Quantize, LayoutPutsEachElementInItsPlace) {
  // A row where one element is far from the rest in every block: it becomes the block's
  // extreme, so it must come back (nearly) exact and at its own index.
  for (GgmlType t : {GgmlType::Q4_0, GgmlType::Q5_0, GgmlType::Q8_0, GgmlType::Q3_K, GgmlType::Q6_K,
                     GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q2_K}) {
    for (int pos = 0; pos < 256; pos += 37) {
      std::vector<float> x(256, 0.01f);
      x[pos] = 1.0f;
      const std::vector<float> y = dequantize(t, quantize(t, x), 256);
      int argmax = 0;
      for (int i = 1; i < 256; ++i) {
        if (y[i] > y[argmax]) argmax = i;
      }
      EXPECT_EQ(argmax, pos) << ggml_type_name(t);
      EXPECT_NEAR(y[pos], 1.0f, 0.05f) << ggml_type_name(t);
    }
  }
}

TEST(Quantize, CanQuantizeEveryListedType) {
  for (const Reference& ref : kReference) EXPECT_TRUE(can_quantize(ref.type));
  EXPECT_TRUE(can_quantize(GgmlType::F32));
  EXPECT_FALSE(can_quantize(GgmlType::Q8_1));
}

}  // namespace
}  // namespace ponder
