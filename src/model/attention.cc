#include "model/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/attention_kernels.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/ggml_math.h"
#include "quant/half.h"

namespace ponder {
namespace {

// llama.cpp pads the KV length it attends over to 256 (masked with -inf); zeros past the f16 dot's
// 64-element step change no sum, so padding to 64 gives the same bits with less work.
constexpr int64_t kAttnPad = 64;

template <typename T>
T* grown(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Runs task(thread, t) for t < n_tasks, handed out one at a time from the last: later rows of a
// prompt attend over more positions, so the heaviest go first and a static split would be lopsided.
template <typename Task>
void run_tasks(ThreadPool& pool, int64_t n_tasks, const Task& task) {
  std::atomic<int64_t> next{0};
  pool.run([&](int ti, int) {
    for (int64_t t = next.fetch_add(1, std::memory_order_relaxed); t < n_tasks;
         t = next.fetch_add(1, std::memory_order_relaxed)) {
      task(ti, n_tasks - 1 - t);
    }
  });
}

// Tiles: runs of up to max_rows consecutive rows of one sequence; `begin` gets their first rows
// and, last, n_rows (kept in the scratch: no allocation per layer once grown).
const std::vector<int64_t>& row_tiles(const Batch& batch, int64_t max_rows,
                                      std::vector<int64_t>& begin) {
  const int64_t n_rows = static_cast<int64_t>(batch.rows.size());
  begin.clear();
  for (int64_t r = 0; r < n_rows; ++r) {
    if (begin.empty() || batch.rows[r].seq != batch.rows[begin.back()].seq ||
        r - begin.back() == max_rows) {
      begin.push_back(r);
    }
  }
  begin.push_back(n_rows);
  return begin;
}

int64_t padded(int64_t n) { return (n + kAttnPad - 1) / kAttnPad * kAttnPad; }

}  // namespace

// Flash order, for one tile (rows [rb, re) of one sequence) and one KV head with its group of G
// query heads, nq = (re - rb) * G query vectors:
//   q: rounded to f16 (as llama.cpp does before its f16 dots)
//   for each block of kFlashBlock positions from 0 (the same blocks whatever the tile):
//     s[p] = dot_f16_ggml(K[p], q) * scale, -inf past the row's own position
//     if the block has a position <= the row's: m' = max(m, max s); c = expf_ggml(m - m')
//       (0 for the first block); e[p] = expf_ggml(s[p] - m') (softmax_exp_sum_ggml, whose sum
//       in double is S); l = l * c + S; acc[i] = acc[i] * c, then acc[i] = fma(e[p], V[p][i],
//       acc[i]) for p in order
//   out[i] = acc[i] * float(1 / l)
// A row never sees the blocks past its position, and positions past it inside its last block add
// exact zeros, so its result is the same in any tile (batch invariance).
void attention_flash(const AttentionInput& in, AttentionScratch& scratch, ThreadPool& pool) {
  const Qwen2Config& c = in.config;
  const Batch& batch = in.batch;
  const int64_t group = c.n_head / c.n_head_kv;
  const int64_t hd = c.head_dim;
  const int64_t bs = in.cache.block_size();
  const int64_t B = kFlashBlock;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  const std::vector<int64_t>& tile_begin = row_tiles(batch, kFlashRows, scratch.tiles);
  const int64_t n_tiles = static_cast<int64_t>(tile_begin.size()) - 1;
  const int64_t max_q = kFlashRows * group;
  if (scratch.threads.size() < static_cast<size_t>(pool.size())) scratch.threads.resize(static_cast<size_t>(pool.size()));

  const AttentionKernels& kern = attention_kernels();
  run_tasks(pool, n_tiles * c.n_head_kv, [&](int ti, int64_t task) {
    const int64_t tile = task / c.n_head_kv;
    const int64_t kvh = task % c.n_head_kv;
    const int64_t rb = tile_begin[tile], re = tile_begin[tile + 1];
    const int64_t nq = (re - rb) * group;
    const auto& table = batch.block_tables[batch.rows[rb].seq];
    AttentionScratch::PerThread& st = scratch.threads[static_cast<size_t>(ti)];
    float* qf = grown(st.floats, static_cast<size_t>(max_q * (2 * hd + B) + B * hd));
    float* acc = qf + max_q * hd;   // [nq][hd]
    float* s = acc + max_q * hd;    // [nq][B] scores, then exps
    float* vconv = s + max_q * B;   // [B][hd] for mad_rows_f16
    double* ml = grown(st.doubles, static_cast<size_t>(2 * max_q));
    double* m = ml;                 // [nq] running max (a float value)
    double* l = ml + max_q;         // [nq] running sum
    const uint16_t** vrows = grown(st.rows, static_cast<size_t>(B));

    int64_t n_kv = 0;
    for (int64_t r = rb; r < re; ++r) {
      const float* qr = in.q + (r * c.n_head + kvh * group) * hd;
      for (int64_t i = 0; i < group * hd; ++i) qf[(r - rb) * group * hd + i] = round_through_fp16(qr[i]);
      n_kv = std::max<int64_t>(n_kv, batch.rows[r].pos + 1);
    }
    std::fill(acc, acc + nq * hd, 0.0f);
    std::fill(m, m + nq, -INFINITY);
    std::fill(l, l + nq, 0.0);

    for (int64_t b0 = 0; b0 < n_kv; b0 += B) {
      const int64_t nb = std::min(B, n_kv - b0);
      for (int64_t p = 0; p < nb; ++p) {
        const int64_t pos = b0 + p;
        const uint16_t* k = in.cache.k(in.layer, table[pos / bs], pos % bs) + kvh * hd;
        kern.dot_f16_f32_heads(k, qf, static_cast<int>(nq), hd, s + p, B);
        vrows[p] = in.cache.v(in.layer, table[pos / bs], pos % bs) + kvh * hd;
      }
      for (int64_t qv = 0; qv < nq; ++qv) {
        float* sq = s + qv * B;
        const int64_t valid = std::min<int64_t>(nb, batch.rows[rb + qv / group].pos + 1 - b0);
        if (valid <= 0) {  // the row ends before this block: it adds nothing
          std::fill(sq, sq + B, 0.0f);
          continue;
        }
        for (int64_t p = 0; p < valid; ++p) sq[p] *= scale;
        std::fill(sq + valid, sq + B, -INFINITY);
        const float m_new = std::max(static_cast<float>(m[qv]), *std::max_element(sq, sq + valid));
        const float corr = m[qv] == -INFINITY ? 0.0f : expf_ggml(static_cast<float>(m[qv]) - m_new);
        l[qv] = l[qv] * corr + softmax_exp_sum_ggml(sq, m_new, B, sq);
        m[qv] = m_new;
        float* a = acc + qv * hd;
        for (int64_t i = 0; i < hd; ++i) a[i] *= corr;
      }
      kern.mad_rows_f16(vrows, nb, s, B, static_cast<int>(nq), hd, acc, vconv);
    }
    for (int64_t qv = 0; qv < nq; ++qv) {
      const int64_t r = rb + qv / group;
      float* out = in.out + (r * c.n_head + kvh * group + qv % group) * hd;
      const float inv = static_cast<float>(1.0 / l[qv]);
      for (int64_t i = 0; i < hd; ++i) out[i] = acc[qv * hd + i] * inv;
    }
  });
}

// llama.cpp's non-flash CPU path, operation for operation: q rounded to f16, f16 dot products,
// softmax over the positions padded to a multiple of 256 with -inf, probabilities rounded to f16,
// then one f16 dot per output element. A task is a tile of rows of one sequence and one KV head
// with its group of query heads: each K row is read once for the tile's nq query vectors, and the
// V rows go in chunks of kGgmlVChunk positions, each chunk added into every query vector's lane
// accumulators while it is in cache. Every query vector's operations are those it would have
// alone, so the result does not depend on the tile (batch invariance).
void attention_ggml_order(const AttentionInput& in, AttentionScratch& scratch, ThreadPool& pool) {
  const Qwen2Config& c = in.config;
  const Batch& batch = in.batch;
  const int64_t group = c.n_head / c.n_head_kv;
  const int64_t hd = c.head_dim;
  const int64_t bs = in.cache.block_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const std::vector<int64_t>& tile_begin = row_tiles(batch, kGgmlTileRows, scratch.tiles);
  const int64_t n_tiles = static_cast<int64_t>(tile_begin.size()) - 1;
  int32_t max_pos = 0;
  for (const BatchRow& r : batch.rows) max_pos = std::max(max_pos, r.pos);
  const int64_t max_pad = padded(max_pos + 1);
  const int64_t max_q = kGgmlTileRows * group;
  if (scratch.threads.size() < static_cast<size_t>(pool.size())) scratch.threads.resize(static_cast<size_t>(pool.size()));

  const AttentionKernels& kern = attention_kernels();
  run_tasks(pool, n_tiles * c.n_head_kv, [&](int ti, int64_t task) {
    const int64_t tile = task / c.n_head_kv;
    const int64_t kvh = task % c.n_head_kv;
    const int64_t rb = tile_begin[tile], re = tile_begin[tile + 1];
    const int64_t nq = (re - rb) * group;
    const auto& table = batch.block_tables[batch.rows[rb].seq];
    AttentionScratch::PerThread& st = scratch.threads[static_cast<size_t>(ti)];
    float* sc = grown(st.floats, static_cast<size_t>(max_q * max_pad + max_pad + max_q + max_q * 64 * hd));
    float* ex = sc + max_q * max_pad;   // [max_pad] exps of one query vector
    float* dots = ex + max_pad;         // [nq] one K row against every query vector
    float* acc = dots + max_q;          // [nq][64 * hd] lane accumulators
    uint16_t* probs = grown(st.halves, static_cast<size_t>(max_q * max_pad + max_q * hd));
    uint16_t* qh = probs + max_q * max_pad;  // [nq][hd] f16
    const uint16_t** vrows = grown(st.rows, static_cast<size_t>(max_pad));

    int64_t n_kv = 0;  // positions the tile's last-placed row sees
    for (int64_t r = rb; r < re; ++r) {
      // The group's query heads kvh * group .. + group - 1 are contiguous in q.
      kern.scaled_to_f16(in.q + (r * c.n_head + kvh * group) * hd, 1.0f, qh + (r - rb) * group * hd,
                         group * hd);
      n_kv = std::max<int64_t>(n_kv, batch.rows[r].pos + 1);
    }
    // Scores sc[qv * max_pad + p]; a row's positions past its own are computed and never used.
    for (int64_t p = 0; p < n_kv; ++p) {
      kern.dot_f16_heads(in.cache.k(in.layer, table[p / bs], p % bs) + kvh * hd, qh,
                         static_cast<int>(nq), hd, dots);
      for (int64_t qv = 0; qv < nq; ++qv) sc[qv * max_pad + p] = dots[qv] * scale;
      vrows[p] = in.cache.v(in.layer, table[p / bs], p % bs) + kvh * hd;
    }
    for (int64_t qv = 0; qv < nq; ++qv) {
      const int64_t n_row = batch.rows[rb + qv / group].pos + 1;
      float* s = sc + qv * max_pad;
      std::fill(s + n_row, s + padded(n_row), -INFINITY);
      const float mx = *std::max_element(s, s + n_row);
      const float inv = static_cast<float>(1.0 / softmax_exp_sum_ggml(s, mx, padded(n_row), ex));
      kern.scaled_to_f16(ex, inv, probs + qv * max_pad, padded(n_row));
    }
    std::fill(acc, acc + nq * 64 * hd, 0.0f);
    for (int64_t c0 = 0; c0 < n_kv; c0 += kGgmlVChunk) {
      for (int64_t qv = 0; qv < nq; ++qv) {
        const int64_t n_row = batch.rows[rb + qv / group].pos + 1;
        const int64_t c1 = std::min(c0 + kGgmlVChunk, n_row);
        if (c1 > c0) kern.accumulate_rows_f16(vrows, probs + qv * max_pad, c0, c1, hd, acc + qv * 64 * hd);
      }
    }
    for (int64_t qv = 0; qv < nq; ++qv) {
      const int64_t r = rb + qv / group;
      kern.reduce_lanes_f16(acc + qv * 64 * hd, hd,
                            in.out + (r * c.n_head + kvh * group + qv % group) * hd);
    }
  });
}

}  // namespace ponder
