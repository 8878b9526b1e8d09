#include "runtime/bench.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/timer.h"
#include "runtime/kv_pool.h"

namespace ponder {
namespace {

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

// Deterministic pseudo-random tokens: the work does not depend on their values.
int32_t bench_token(int64_t i, int64_t n_vocab) {
  return static_cast<int32_t>((i * 7919 + 13) % n_vocab);
}

// Tokens i < n (bench_token(i)) at the positions start + i of the sequence whose blocks are
// `table`, in forward passes of n_batch (1: decode steps), logits of each pass's last row.
Status forward_positions(Qwen2Model& model, KvCache& cache, const std::vector<int32_t>& table,
                         int32_t start, int32_t n, int32_t n_batch, float* logits,
                         ThreadPool& pool) {
  const int64_t n_vocab = model.config().n_vocab;
  for (int32_t b = 0; b < n; b += n_batch) {
    Batch batch;
    batch.block_tables.push_back(table);
    const int32_t e = std::min(n, b + n_batch);
    for (int32_t i = b; i < e; ++i)
      batch.rows.push_back({bench_token(i, n_vocab), start + i, 0, i + 1 == e});
    PONDER_RETURN_IF_ERROR(model.forward(batch, cache, logits, pool));
  }
  return Status::ok();
}

// The positions [0, n) of the sequence whose blocks are `table`, in chunks of n_batch.
Status fill_context(Qwen2Model& model, KvCache& cache, const std::vector<int32_t>& table, int32_t n,
                    int32_t n_batch, float* logits, ThreadPool& pool) {
  return forward_positions(model, cache, table, 0, n, n_batch, logits, pool);
}

// Blocks [first, first + n) as a block table.
std::vector<int32_t> block_range(int64_t first, int64_t n) {
  std::vector<int32_t> t;
  for (int64_t b = 0; b < n; ++b) t.push_back(static_cast<int32_t>(first + b));
  return t;
}

}  // namespace

double BenchResult::mean_s() const { return mean(seconds); }
double BenchResult::stddev_s() const { return stddev(seconds); }
double BenchResult::mean_ts() const {
  std::vector<double> ts;
  for (double s : seconds) ts.push_back(tokens() / s);
  return mean(ts);
}
double BenchResult::stddev_ts() const {
  std::vector<double> ts;
  for (double s : seconds) ts.push_back(tokens() / s);
  return stddev(ts);
}

int64_t weight_bytes_per_token(const Qwen2Model& model) {
  const Qwen2Weights& w = model.weights();
  auto bytes = [](const WeightView& v) { return v.row_bytes() * v.n_out; };
  int64_t total = w.token_embd.row_bytes() + bytes(w.output);
  for (const Qwen2Layer& l : w.layers) {
    total += bytes(l.wq) + bytes(l.wk) + bytes(l.wv) + bytes(l.wo) + bytes(l.w_gate) +
             bytes(l.w_up) + bytes(l.w_down);
  }
  return total;
}

Expected<BenchResult> run_bench(Qwen2Model& model, int32_t n_prompt, int32_t n_gen, int32_t n_seq,
                                int reps, ThreadPool& pool, int32_t n_batch, int32_t n_depth) {
  const int64_t n_vocab = model.config().n_vocab;
  const int32_t per_seq = n_depth + std::max(n_prompt, 1) + n_gen;
  const int64_t block = kKvBlockSize;  // the serving engine's block size
  const int64_t blocks_per_seq = (per_seq + block - 1) / block;
  KvCache cache = model.make_cache(blocks_per_seq * n_seq, block);
  std::vector<std::vector<int32_t>> tables;
  for (int32_t s = 0; s < n_seq; ++s)
    tables.push_back(block_range(s * blocks_per_seq, blocks_per_seq));
  std::vector<float> logits(static_cast<size_t>(std::max<int32_t>(n_seq, 1) * n_vocab));
  BenchResult result;
  result.n_prompt = n_prompt;
  result.n_gen = n_gen;
  result.n_seq = n_seq;
  result.n_threads = pool.size();
  result.n_depth = n_depth;
  result.flash_attn = model.flash_attention();
  auto token_at = [&](int64_t i) { return bench_token(i, n_vocab); };

  // The context each test starts from: n_depth positions of every sequence, in prompt-sized chunks.
  for (int32_t s = 0; s < n_seq; ++s) {
    PONDER_RETURN_IF_ERROR(
        fill_context(model, cache, tables[s], n_depth, n_batch, logits.data(), pool));
  }

  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up caches and page tables
    Timer t;
    if (n_gen == 0) {
      PONDER_RETURN_IF_ERROR(forward_positions(model, cache, tables[0], n_depth, n_prompt, n_batch,
                                               logits.data(), pool));
    } else {
      // Each sequence starts from one token at position n_depth, then steps together.
      for (int32_t pos = 0; pos < n_gen; ++pos) {
        Batch batch;
        for (int32_t s = 0; s < n_seq; ++s) {
          batch.block_tables.push_back(tables[s]);
          batch.rows.push_back({token_at(pos * n_seq + s), n_depth + pos, s, true});
        }
        PONDER_RETURN_IF_ERROR(model.forward(batch, cache, logits.data(), pool));
      }
    }
    if (rep >= 0) result.seconds.push_back(t.seconds());
  }
  return result;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

Expected<PairedBench> run_bench_paired(Qwen2Model& model, int32_t n_prompt, int32_t n_gen,
                                       int32_t n_depth, int reps, ThreadPool& pool,
                                       int32_t n_batch) {
  if ((n_prompt > 0) == (n_gen > 0) || n_prompt < 0 || n_gen < 0 || n_depth < 1 || n_batch < 1) {
    return Status::errorf("paired bench: pp{} tg{} at depth {}: one of pp and tg, at a depth > 0",
                          n_prompt, n_gen, n_depth);
  }
  const int64_t n_vocab = model.config().n_vocab;
  const int32_t n_pos = n_prompt + n_gen;  // positions one run writes
  const int64_t zero_blocks = (n_pos + kKvBlockSize - 1) / kKvBlockSize;
  const int64_t depth_blocks = (n_depth + n_pos + kKvBlockSize - 1) / kKvBlockSize;
  KvCache cache = model.make_cache(zero_blocks + depth_blocks, kKvBlockSize);
  const std::vector<int32_t> zero_table = block_range(0, zero_blocks),
                             depth_table = block_range(zero_blocks, depth_blocks);
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  PONDER_RETURN_IF_ERROR(
      fill_context(model, cache, depth_table, n_depth, n_batch, logits.data(), pool));
  // One sequence from position `start`: the prompt in batches of n_batch or n_gen decode steps;
  // seconds.
  auto run = [&](const std::vector<int32_t>& table, int32_t start) -> Expected<double> {
    Timer t;
    PONDER_RETURN_IF_ERROR(forward_positions(model, cache, table, start, n_pos,
                                             n_gen > 0 ? 1 : n_batch, logits.data(), pool));
    return t.seconds();
  };
  PairedBench out;
  for (BenchResult* r : {&out.at_zero, &out.at_depth}) {
    r->n_prompt = n_prompt;
    r->n_gen = n_gen;
    r->n_threads = pool.size();
    r->flash_attn = model.flash_attention();
  }
  out.at_depth.n_depth = n_depth;
  for (int rep = -1; rep < reps; ++rep) {  // rep -1 warms up both
    double s0 = 0, sd = 0;
    for (int k = 0; k < 2; ++k) {
      const bool zero_now = (k == 0) == (rep % 2 == 0);
      auto s = zero_now ? run(zero_table, 0) : run(depth_table, n_depth);
      if (!s.has_value()) return s.status();
      (zero_now ? s0 : sd) = *s;
    }
    if (rep < 0) continue;
    out.at_zero.seconds.push_back(s0);
    out.at_depth.seconds.push_back(sd);
    out.ratios.push_back(s0 / sd);
  }
  return out;
}

int64_t kv_bytes_per_position(const Qwen2Model& model) {
  const Qwen2Config& c = model.config();
  return c.n_layer * c.n_head_kv *
         (kv_row_bytes(model.kv_type_k(), c.head_dim) +
          kv_row_bytes(model.kv_type_v(), c.head_dim));
}

double tg_roofline_fraction(const Qwen2Model& model, double depth) {
  const double w = static_cast<double>(weight_bytes_per_token(model));
  return w / (w + depth * static_cast<double>(kv_bytes_per_position(model)));
}

Expected<std::vector<SweepPoint>> run_sweep(Qwen2Model& model, int32_t max_depth, int32_t n_pp,
                                            int32_t n_tg, ThreadPool& pool) {
  if (n_pp < 1 || n_tg < 1 || max_depth < n_pp)
    return Status::errorf("sweep: depth {} with pp {} and tg {}: nothing to measure", max_depth,
                          n_pp, n_tg);
  const int64_t n_vocab = model.config().n_vocab;
  const int64_t block = kKvBlockSize;
  const int64_t n_blocks = (max_depth + n_pp + n_tg + block - 1) / block;
  KvCache cache = model.make_cache(n_blocks, block);
  std::vector<int32_t> table;
  for (int64_t b = 0; b < n_blocks; ++b) table.push_back(static_cast<int32_t>(b));
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  auto chunk = [&](int32_t first, int32_t n) -> Status {
    Batch batch;
    batch.block_tables.push_back(table);
    for (int32_t i = 0; i < n; ++i)
      batch.rows.push_back({bench_token(first + i, n_vocab), first + i, 0, i + 1 == n});
    return model.forward(batch, cache, logits.data(), pool);
  };
  PONDER_RETURN_IF_ERROR(chunk(0, n_pp));  // warm-up, overwritten below
  std::vector<SweepPoint> out;
  for (int32_t depth = 0; depth + n_pp <= max_depth; depth += n_pp) {
    SweepPoint p;
    p.depth = depth;
    Timer t;
    for (int32_t i = 0; i < n_tg; ++i)
      PONDER_RETURN_IF_ERROR(chunk(depth + i, 1));  // then overwritten by the prompt
    p.tg_s = t.seconds();
    Timer t2;
    PONDER_RETURN_IF_ERROR(chunk(depth, n_pp));
    p.pp_s = t2.seconds();
    out.push_back(p);
  }
  return out;
}

}  // namespace ponder
