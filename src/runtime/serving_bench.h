// The serving benchmark behind `ponder bench --concurrent`: N requests submitted at once to an
// Engine (distinct random prompts of n_prompt tokens, n_gen tokens each, greedy, end of sequence
// ignored, like llama-batched-bench), timed from the events each request streams.
// Depends on runtime/engine.h.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"

namespace ponder {

struct ServingBenchResult {
  int32_t n_concurrent = 0;
  int32_t n_prompt = 0;
  int32_t n_gen = 0;
  double total_s = 0;    // the whole workload (llama-batched-bench's T)
  double gen_tps = 0;    // tokens per second while every stream decodes (its S_TG):
                         // tokens after the last first token / time after it
  double total_tps = 0;  // generated tokens / total_s
  double ttft_p50_s = 0, ttft_p95_s = 0;
  double latency_p50_s = 0, latency_p95_s = 0;  // a request's submission to its last token
  double max_gap_s = 0;                         // longest time between two tokens of any stream
  int32_t late_prompt = 0;  // a prompt of this many tokens arrived once every stream decoded
  double late_ttft_s = 0;   // its time to first token
  int64_t preemptions = 0;
  double cpu_util = 0;  // process CPU time / wall time / cores, over the workload
};

// One warm-up request first, then the workload. The engine must be idle. late_prompt > 0: once
// every stream has its second token, a request with a prompt that long arrives (max_gap_s then
// shows how long its prefill stalled the streams). grammar: every request's output constrained
// by it from the first token (`ponder bench --json-schema`).
Expected<ServingBenchResult> run_serving_bench(Engine& engine, int32_t n_vocab,
                                               int32_t n_concurrent, int32_t n_prompt,
                                               int32_t n_gen, int32_t late_prompt = 0,
                                               uint64_t seed = 1,
                                               std::shared_ptr<grammar::Grammar> grammar = nullptr);

}  // namespace ponder
