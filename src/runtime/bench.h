// Benchmarks of the forward pass, like llama-bench: prompt processing (pp: n tokens in one batch
// per chunk) and text generation (tg: n tokens one at a time, each reading every weight), plus
// batched decode (B sequences stepping together). Timing only: no sampling, argmax inputs.
// Depends on model, base.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/qwen2_model.h"

namespace ponder {

struct BenchResult {
  int32_t n_prompt = 0;  // pp test: prompt tokens
  int32_t n_gen = 0;     // tg test: generated tokens (per sequence)
  int32_t n_seq = 1;     // sequences decoding together
  int32_t n_depth = 0;   // positions already in each sequence's context when the test starts
  bool flash_attn = false;
  int n_threads = 1;
  std::vector<double> seconds;  // one per repetition
  double tokens() const { return n_prompt + static_cast<double>(n_gen) * n_seq; }
  double mean_ts() const;
  double stddev_ts() const;
  double mean_s() const;
  double stddev_s() const;
};

// Runs pp (n_prompt > 0, n_gen == 0) or tg (n_gen > 0) `reps` times after one warm-up, each
// sequence starting at position n_depth (its first n_depth positions filled once, untimed).
Expected<BenchResult> run_bench(Qwen2Model& model, int32_t n_prompt, int32_t n_gen, int32_t n_seq,
                                int reps, ThreadPool& pool, int32_t n_batch = 512,
                                int32_t n_depth = 0);

// A prompt of n_prompt tokens (in batches of n_batch) or n_gen decode steps (exactly one of them)
// at depth n_depth beside the same at depth 0, in alternating repetitions (depth 0 first in even
// ones, last in odd ones) over two contexts kept side by side, after one warm-up of each: a machine
// whose speed drifts between runs moves both alike, so each repetition's ratio holds where the
// means of two separate runs do not.
struct PairedBench {
  BenchResult at_zero, at_depth;
  std::vector<double> ratios;  // per repetition: t/s at depth over t/s at depth 0
};
double median(std::vector<double> v);  // 0 for none
Expected<PairedBench> run_bench_paired(Qwen2Model& model, int32_t n_prompt, int32_t n_gen,
                                       int32_t n_depth, int reps, ThreadPool& pool,
                                       int32_t n_batch = 512);

// Bytes of K and V (f16) one position adds to what each decode step reads.
int64_t kv_bytes_per_position(const Qwen2Model& model);
// Decode at depth d reads the weights plus d positions of K/V: the fraction of depth 0's speed
// the memory allows, weights / (weights + d * kv_bytes_per_position).
double tg_roofline_fraction(const Qwen2Model& model, double depth);

// ik_llama.cpp's sweep-bench: one sequence grown n_pp positions at a time up to max_depth; at each
// depth n_tg decode steps (timed, then overwritten) and a timed n_pp-token prompt chunk.
struct SweepPoint {
  int32_t depth = 0;
  double pp_s = 0, tg_s = 0;  // seconds for n_pp prompt tokens, for n_tg decode steps
};
Expected<std::vector<SweepPoint>> run_sweep(Qwen2Model& model, int32_t max_depth, int32_t n_pp,
                                            int32_t n_tg, ThreadPool& pool);

// Bytes read from weights to generate one token: every matrix once, one embedding row.
int64_t weight_bytes_per_token(const Qwen2Model& model);

}  // namespace ponder
