#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/x16_test_support.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

std::vector<uint8_t> random_weights(GgmlType type, int64_t n_out, int64_t n_in, std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 0.05f);
  std::vector<float> f(static_cast<size_t>(n_out * n_in));
  for (float& v : f) v = g(rng);
  std::vector<uint8_t> q(static_cast<size_t>(n_out * ggml_row_bytes(type, n_in)));
  for (int64_t o = 0; o < n_out; ++o) {
    quantize_row(type, f.data() + o * n_in, q.data() + o * ggml_row_bytes(type, n_in), n_in);
  }
  return q;
}

// A group of products gives each product's matmul() result bit for bit, for mixed types and
// uneven output counts, one row (decode) or several (prompt).
TEST(MatmulGroupTest, EqualsSeparateMatmulsBitwise) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t n_in = 512;
  const struct {
    GgmlType type;
    int64_t n_out;
  } parts[] = {{GgmlType::Q4_K, 96}, {GgmlType::Q6_K, 32}, {GgmlType::Q4_K, 48}};
  std::vector<std::vector<uint8_t>> data;
  std::vector<WeightView> views;
  for (const auto& p : parts) data.push_back(random_weights(p.type, p.n_out, n_in, rng));
  for (size_t k = 0; k < data.size(); ++k)
    views.push_back({parts[k].type, data[k].data(), n_in, parts[k].n_out});
  for (int threads : {1, 2}) {
    ThreadPool pool(threads);
    for (int64_t n_rows : {1, 5}) {
      std::vector<float> x(static_cast<size_t>(n_rows * n_in));
      for (float& v : x) v = g(rng);
      std::vector<std::vector<float>> alone(3), grouped(3);
      const WeightView* w[3];
      float* y[3];
      for (int k = 0; k < 3; ++k) {
        alone[k].resize(static_cast<size_t>(n_rows * views[k].n_out));
        grouped[k].resize(alone[k].size());
        matmul(views[k], x.data(), n_rows, alone[k].data(), pool);
        w[k] = &views[k];
        y[k] = grouped[k].data();
      }
      matmul_group(w, y, 3, x.data(), n_rows, pool);
      for (int k = 0; k < 3; ++k) {
        ASSERT_EQ(std::memcmp(alone[k].data(), grouped[k].data(), alone[k].size() * 4), 0)
            << "part " << k << " rows " << n_rows << " threads " << threads;
      }
    }
  }
}

// A long prompt's rows go through the kernels in chunks (matmul.cc's kRowChunk): 300 rows (two
// whole chunks and a part) give each row's result alone, bit for bit, in the ggml layout and in
// the x16 copy, with one thread and two.
TEST(MatmulGroupTest, ManyRowsEqualEachRowAloneBitwise) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int64_t n_in = 256, n_out = 48, n_rows = 300;
  std::vector<float> x(static_cast<size_t>(n_rows * n_in));
  for (float& v : x) v = g(rng);
  for (GgmlType type : {GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::F16}) {
    const std::vector<uint8_t> q = random_weights(type, n_out, n_in, rng);
    WeightView w{type, q.data(), n_in, n_out};
    AlignedBuffer x16_copy(0);
    for (bool x16 : {false, true}) {
      if (x16) {
        if (!x16_supported(type, n_out, n_in)) continue;
        x16_copy = interleaved(w);
        w.x16 = x16_copy.data();
      }
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> all(static_cast<size_t>(n_rows * n_out)),
            one(static_cast<size_t>(n_out));
        matmul(w, x.data(), n_rows, all.data(), pool);
        for (int64_t r = 0; r < n_rows; ++r) {
          matmul(w, x.data() + r * n_in, 1, one.data(), pool);
          ASSERT_EQ(std::memcmp(one.data(), all.data() + r * n_out, n_out * sizeof(float)), 0)
              << ggml_type_name(type) << (x16 ? " x16" : "") << " row " << r << " threads "
              << threads;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ponder
