// Both attention orders against a plain double-precision attention, and the flash order's batch
// invariance (a row's bits do not depend on the rows it shares a tile with).
#include "model/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "quant/half.h"

namespace ponder {
namespace {

struct AttentionCase {
  Qwen2Config config;
  KvCache cache;
  std::vector<std::vector<int32_t>> tables;
  Batch batch;
  std::vector<float> q;

  AttentionCase(int64_t head_dim,
                const std::vector<std::pair<int32_t, int32_t>>& rows /* (seq, pos) */,
                KvType kv = KvType::kF16)
      : config(make_config(head_dim)), cache(1, config.n_head_kv, head_dim, 4 * 64, 16, kv, kv) {
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.0f, 1.0f);
    // Sequence s owns blocks s, s + 4, s + 8, ... (not contiguous, as in the block pool).
    tables.resize(4);
    for (int32_t s = 0; s < 4; ++s) {
      for (int32_t b = 0; b < 64; ++b) tables[static_cast<size_t>(s)].push_back(s + 4 * b);
    }
    for (int64_t b = 0; b < cache.n_blocks(); ++b) {
      for (int64_t slot = 0; slot < cache.block_size(); ++slot) {
        for (int64_t h = 0; h < cache.n_head_kv(); ++h) {
          std::vector<float> k(static_cast<size_t>(head_dim)), v(static_cast<size_t>(head_dim));
          for (int64_t i = 0; i < head_dim; ++i) {
            k[static_cast<size_t>(i)] = 3.0f * g(rng);
            v[static_cast<size_t>(i)] = g(rng);
          }
          cache.store_k(0, b, h, slot, k.data());
          cache.store_v(0, b, h, slot, v.data());
        }
      }
    }
    for (const auto& t : tables) batch.block_tables.emplace_back(t);
    for (const auto& [seq, pos] : rows) batch.rows.push_back({0, pos, seq, false});
    q.resize(rows.size() * static_cast<size_t>(config.n_head * head_dim));
    for (float& e : q) e = g(rng);
  }

  static Qwen2Config make_config(int64_t head_dim) {
    Qwen2Config c;
    c.n_head = 6;
    c.n_head_kv = 2;
    c.head_dim = head_dim;
    c.n_embd = c.n_head * head_dim;
    return c;
  }

  std::vector<float> run(bool flash, const Batch& b, const float* qs, int threads) {
    std::vector<float> out(b.rows.size() * static_cast<size_t>(config.n_head * config.head_dim));
    AttentionScratch scratch;
    ThreadPool pool(threads);
    const AttentionInput in{config, b, cache, 0, qs, out.data()};
    if (flash) {
      attention_flash(in, scratch, pool);
    } else {
      attention_ggml_order(in, scratch, pool);
    }
    return out;
  }

  // softmax(q.K / sqrt(hd)) V in double, q rounded to f16 as the ggml order does or kept as is
  // (the flash order).
  std::vector<double> exact(bool round_q) const {
    const int64_t hd = config.head_dim, group = config.n_head / config.n_head_kv;
    std::vector<double> out(q.size());
    for (size_t r = 0; r < batch.rows.size(); ++r) {
      const BatchRow& row = batch.rows[r];
      const auto& table = tables[static_cast<size_t>(row.seq)];
      for (int64_t h = 0; h < config.n_head; ++h) {
        const float* qh = &q[(r * config.n_head + h) * hd];
        const int64_t kvh = h / group;
        std::vector<double> s(static_cast<size_t>(row.pos + 1));
        std::vector<float> k(static_cast<size_t>(hd)), v(static_cast<size_t>((row.pos + 1) * hd));
        double mx = -INFINITY;
        for (int64_t p = 0; p <= row.pos; ++p) {
          cache.load_k(0, table[p / 16], kvh, p % 16, k.data());
          cache.load_v(0, table[p / 16], kvh, p % 16, &v[static_cast<size_t>(p * hd)]);
          double d = 0;
          for (int64_t i = 0; i < hd; ++i)
            d += double(round_q ? round_through_fp16(qh[i]) : qh[i]) * k[static_cast<size_t>(i)];
          s[p] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[p]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (int64_t p = 0; p <= row.pos; ++p) acc += s[p] * v[static_cast<size_t>(p * hd + i)];
          out[(r * config.n_head + h) * hd + i] = acc / sum;
        }
      }
    }
    return out;
  }
};

// Rows of three sequences, interleaved and of uneven lengths, some past several KV blocks.
std::vector<std::pair<int32_t, int32_t>> mixed_rows() {
  std::vector<std::pair<int32_t, int32_t>> rows;
  for (int32_t p = 0; p < 150; ++p) rows.push_back({0, p});
  for (int32_t p = 60; p < 75; ++p) rows.push_back({2, p});
  rows.push_back({1, 0});
  rows.push_back({1, 200});
  // Past kGgmlVChunk positions: V in more than one chunk.
  for (int32_t p = 598; p < 603; ++p) rows.push_back({1, p});
  rows.push_back({1, 1000});
  for (int32_t p = 120; p < 131; ++p) rows.push_back({3, p});
  return rows;
}

TEST(AttentionTest, BothOrdersAreAttention) {
  for (int64_t hd : {128, 64, 40}) {
    AttentionCase s(hd, mixed_rows());
    for (bool flash : {true, false}) {
      const std::vector<double> want = s.exact(!flash);
      const std::vector<float> got = s.run(flash, s.batch, s.q.data(), 2);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
      // ggml order rounds the probabilities to f16 (~5e-4 relative); flash keeps them in f32.
      EXPECT_LT(worst, flash ? 2e-5 : 2e-3) << "head_dim " << hd << (flash ? " flash" : " ggml");
    }
  }
}

// A row's bits do not depend on the rows it shares a tile with, in either order.
TEST(AttentionTest, RowsAreTheSameAloneAndInAnyTile) {
  AttentionCase s(128, mixed_rows());
  const int64_t width = s.config.n_head * s.config.head_dim;
  for (bool flash : {true, false}) {
    const std::vector<float> together = s.run(flash, s.batch, s.q.data(), 2);
    for (size_t r = 0; r < s.batch.rows.size(); ++r) {
      // A sample, the last rows, and every row past one chunk of the flash order (split-K alone).
      if (r % 7 != 0 && r + 8 < s.batch.rows.size() && s.batch.rows[r].pos < kAttnChunk) continue;
      Batch alone;
      alone.block_tables = s.batch.block_tables;
      alone.rows.push_back(s.batch.rows[r]);
      const std::vector<float> one = s.run(flash, alone, &s.q[r * width], 1);
      ASSERT_EQ(std::memcmp(one.data(), &together[r * width], width * sizeof(float)), 0)
          << "row " << r << (flash ? " flash" : " ggml");
    }
  }
}

// A Q8_0 cache: the block order reads it directly; the result is attention over the dequantized
// K and V, and a row's bits do not depend on its tile.
TEST(AttentionTest, Q8_0CacheIsAttentionAndBatchInvariant) {
  for (int64_t hd : {128, 64}) {
    AttentionCase s(hd, mixed_rows(), KvType::kQ8_0);
    const std::vector<double> want = s.exact(false);
    const std::vector<float> together = s.run(true, s.batch, s.q.data(), 2);
    double worst = 0;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(together[i] - want[i]));
    EXPECT_LT(worst, 2e-5) << "head_dim " << hd;
    const int64_t width = s.config.n_head * hd;
    for (size_t r = 0; r < s.batch.rows.size(); r += 5) {
      Batch alone;
      alone.block_tables = s.batch.block_tables;
      alone.rows.push_back(s.batch.rows[r]);
      const std::vector<float> one = s.run(true, alone, &s.q[r * width], 1);
      ASSERT_EQ(std::memcmp(one.data(), &together[r * width], width * sizeof(float)), 0)
          << "row " << r;
    }
  }
}

// K and V rows round-trip through each type: f16 as fp32_to_fp16, Q8_0 within half a step of
// each 32-block's scale; copy_block copies the stored bytes.
TEST(KvCacheTest, RowsRoundTripAndCopyInEachType) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 2.0f);
  for (KvType t : {KvType::kF16, KvType::kQ8_0}) {
    KvCache cache(2, 2, 64, 4, 16, t, t);
    EXPECT_EQ(cache.bytes(), static_cast<size_t>(2 * 2 * 4 * 16) * 2 * kv_row_bytes(t, 64));
    std::vector<float> x(64), y(64), z(64);
    for (float& e : x) e = g(rng);
    cache.store_k(1, 2, 1, 5, x.data());
    cache.store_v(1, 2, 1, 5, x.data());
    cache.load_k(1, 2, 1, 5, y.data());
    for (int b = 0; b < 2; ++b) {
      float amax = 0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
      for (int i = 0; i < 32; ++i) {
        const float tol =
            t == KvType::kF16 ? std::fabs(x[b * 32 + i]) * 1e-3f : amax / 127 * 0.51f + 1e-6f;
        EXPECT_NEAR(y[b * 32 + i], x[b * 32 + i], tol) << kv_type_name(t);
      }
    }
    cache.copy_block(2, 3, 6);
    cache.load_v(1, 3, 1, 5, z.data());
    EXPECT_EQ(std::memcmp(y.data(), z.data(), sizeof(float) * 64), 0) << kv_type_name(t);
  }
  EXPECT_FALSE(parse_kv_type("q4_0").has_value());
  EXPECT_EQ(*parse_kv_type("q8_0"), KvType::kQ8_0);
}

}  // namespace
}  // namespace ponder
