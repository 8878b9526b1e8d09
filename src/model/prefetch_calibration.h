// Chooses, on this machine, whether the x16 decode kernels prefetch the weight stream in software
// (kernels/weight_prefetch.h says why it differs between machines): one-row products over the
// model's own feed-forward weights, far more bytes than the caches hold, timed with and without
// prefetching in alternation (5 paired rounds, judged by their median ratio), and the faster kept
// unless the two are within 3% (then prefetching, the old behaviour, stays). ~0.15 s at load for
// the 1.5B model; skipped where PONDER_PREFETCH forces the choice or the weights are too small to
// leave the caches (the tiny test models). Depends on kernels and model/qwen2_weights.h.
#pragma once

#include "base/thread_pool.h"
#include "model/qwen2_weights.h"

namespace ponder {

struct PrefetchCalibration {
  bool measured = false;  // false: forced by the environment or skipped
  bool prefetch = true;   // the choice now in force
  double s_with = 0;      // the best pass with prefetching (seconds)
  double s_without = 0;   // the best pass without
};

PrefetchCalibration calibrate_weight_prefetch(const Qwen2Weights& weights, ThreadPool& pool);

}  // namespace ponder
