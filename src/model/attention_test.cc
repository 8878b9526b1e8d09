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

  AttentionCase(int64_t head_dim, const std::vector<std::pair<int32_t, int32_t>>& rows /* (seq, pos) */)
      : config(make_config(head_dim)), cache(1, config.n_head_kv, head_dim, 4 * 64, 16) {
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
          for (int64_t i = 0; i < head_dim; ++i) {
            cache.k(0, b, h, slot)[i] = fp32_to_fp16(3.0f * g(rng));
            cache.v(0, b, h, slot)[i] = fp32_to_fp16(g(rng));
          }
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
        double mx = -INFINITY;
        for (int64_t p = 0; p <= row.pos; ++p) {
          const uint16_t* k = cache.k(0, table[p / 16], kvh, p % 16);
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += double(round_q ? round_through_fp16(qh[i]) : qh[i]) * fp16_to_fp32(k[i]);
          s[p] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[p]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t i = 0; i < hd; ++i) {
          double acc = 0;
          for (int64_t p = 0; p <= row.pos; ++p)
            acc += s[p] * fp16_to_fp32(cache.v(0, table[p / 16], kvh, p % 16)[i]);
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

}  // namespace
}  // namespace ponder
