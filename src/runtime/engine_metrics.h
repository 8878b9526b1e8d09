// EngineMetrics: what the server exposes about the engine (/metrics, the page's server panel):
// queue and batch, KV blocks, prefix-cache hits, token rates, time to first token, steps per
// second, and the process's CPU use (the figure the users' guides watch in `top`).
// MetricsRecorder keeps the counters (the engine thread writes, any thread reads) and turns them
// into rates over the last few seconds.
// Depends on nothing but the standard library.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>

namespace ponder {

struct EngineCounters {
  int64_t requests = 0;           // accepted
  int64_t requests_rejected = 0;  // refused by submit (bad request, busy)
  int64_t requests_finished = 0;  // ended by stop / length
  int64_t requests_cancelled = 0;
  int64_t prompt_tokens = 0;         // of admitted sequences
  int64_t prompt_tokens_cached = 0;  // of those, taken from the prefix cache
  int64_t prompt_rows = 0;           // prompt positions computed (recomputes included)
  int64_t generated_tokens = 0;
  int64_t preemptions = 0;
  int64_t drafted_tokens = 0;         // speculative decoding: guesses verified
  int64_t draft_accepted_tokens = 0;  // of those, kept
  int64_t steps = 0;
  int64_t step_sequences = 0;  // sequences in each step, summed over steps
  double busy_s = 0;           // time spent in forward passes
  double ttft_sum_s = 0;       // over first tokens
  int64_t ttft_count = 0;
  double ttft_last_s = 0;
  // Time to first token as a histogram: how many were at most kTtftBuckets[i] seconds.
  static constexpr std::array<double, 9> kTtftBuckets = {0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60};
  std::array<int64_t, 9> ttft_le{};
  // Sums another engine's counters into these (several models' engines in one /metrics); the
  // last TTFT is the other's when it has one.
  void add(const EngineCounters& o) {
    requests += o.requests;
    requests_rejected += o.requests_rejected;
    requests_finished += o.requests_finished;
    requests_cancelled += o.requests_cancelled;
    prompt_tokens += o.prompt_tokens;
    prompt_tokens_cached += o.prompt_tokens_cached;
    prompt_rows += o.prompt_rows;
    generated_tokens += o.generated_tokens;
    preemptions += o.preemptions;
    drafted_tokens += o.drafted_tokens;
    draft_accepted_tokens += o.draft_accepted_tokens;
    steps += o.steps;
    step_sequences += o.step_sequences;
    busy_s += o.busy_s;
    ttft_sum_s += o.ttft_sum_s;
    ttft_count += o.ttft_count;
    if (o.ttft_count > 0) ttft_last_s = o.ttft_last_s;
    for (size_t k = 0; k < ttft_le.size(); ++k) ttft_le[k] += o.ttft_le[k];
  }
  void add_ttft(double s) {
    ttft_sum_s += s;
    ttft_count++;
    ttft_last_s = s;
    for (size_t i = 0; i < kTtftBuckets.size(); ++i) ttft_le[i] += s <= kTtftBuckets[i];
  }
};

// The prefix cache on disk (runtime/kv_disk.h; all zero when --kv-disk is off).
struct KvDiskStats {
  int64_t blocks_read = 0;     // blocks read back instead of computed
  int64_t blocks_written = 0;  // blocks written to disk
  int64_t blocks_dropped = 0;  // not written: the write queue was full or a block outgrew the bound
  int64_t read_errors = 0;     // damaged or foreign files found (removed, their blocks computed)
  int64_t write_errors = 0;    // writes that failed (a full disk, a read-only directory)
  int64_t blocks = 0;          // blocks on disk now (this model and cache type)
  int64_t files = 0;
  int64_t bytes = 0;
  double read_s = 0;  // time spent reading blocks back (read, checksum, copy into the cache)
  double copy_s = 0;  // the writer thread's time copying blocks out of the cache
  void add(const KvDiskStats& o) {
    blocks_read += o.blocks_read;
    blocks_written += o.blocks_written;
    blocks_dropped += o.blocks_dropped;
    read_errors += o.read_errors;
    write_errors += o.write_errors;
    blocks += o.blocks;
    files += o.files;
    bytes += o.bytes;
    read_s += o.read_s;
    copy_s += o.copy_s;
  }
};

struct EngineMetrics {
  EngineCounters total;
  KvDiskStats kv_disk;
  int32_t requests_waiting = 0;
  int32_t sequences_running = 0;
  int32_t kv_blocks_total = 0;
  int32_t kv_blocks_used = 0;    // held by running sequences
  int32_t kv_blocks_cached = 0;  // unused, kept for prefix reuse until evicted
  int32_t kv_block_size = 0;
  // Over the last few seconds:
  double prompt_tps = 0;  // prompt positions computed per second
  double gen_tps = 0;     // tokens generated per second, all requests
  double steps_per_s = 0;
  double cpu_util = 0;  // CPU time of the process / wall time / cores: 0..1
  double uptime_s = 0;
  double ttft_mean_s() const {
    return total.ttft_count ? total.ttft_sum_s / static_cast<double>(total.ttft_count) : 0;
  }
};

class MetricsRecorder {
 public:
  MetricsRecorder();

  // f(counters) under the lock.
  template <typename F>
  void update(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    f(counters_);
  }
  void set_gauges(int32_t waiting, int32_t running, int32_t blocks_total, int32_t used,
                  int32_t cached, int32_t block_size);
  EngineMetrics snapshot() const;

 private:
  struct Sample {
    std::chrono::steady_clock::time_point t;
    double cpu_s;
    EngineCounters c;
  };
  void sample_locked() const;

  mutable std::mutex mu_;
  EngineCounters counters_;
  EngineMetrics gauges_;
  std::chrono::steady_clock::time_point start_;
  mutable std::deque<Sample> samples_;  // one every ~0.5 s, the last ~5 s
};

// CPU time (user + system) this process has used, in seconds.
double process_cpu_seconds();

}  // namespace ponder
