#include "runtime/engine_metrics.h"

#include <sys/resource.h>

#include <algorithm>
#include <thread>

namespace ponder {
namespace {

constexpr std::chrono::milliseconds kSampleEvery{500};
constexpr std::chrono::seconds kWindow{5};

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto sec = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return sec(ru.ru_utime) + sec(ru.ru_stime);
}

MetricsRecorder::MetricsRecorder() : start_(std::chrono::steady_clock::now()) {
  samples_.push_back({start_, process_cpu_seconds(), counters_});
}

void MetricsRecorder::set_gauges(int32_t waiting, int32_t running, int32_t blocks_total,
                                 int32_t used, int32_t cached, int32_t block_size) {
  std::lock_guard<std::mutex> lock(mu_);
  gauges_.requests_waiting = waiting;
  gauges_.sequences_running = running;
  gauges_.kv_blocks_total = blocks_total;
  gauges_.kv_blocks_used = used;
  gauges_.kv_blocks_cached = cached;
  gauges_.kv_block_size = block_size;
  sample_locked();
}

void MetricsRecorder::sample_locked() const {
  const auto now = std::chrono::steady_clock::now();
  if (now - samples_.back().t >= kSampleEvery)
    samples_.push_back({now, process_cpu_seconds(), counters_});
  while (samples_.size() > 2 && now - samples_[1].t > kWindow) samples_.pop_front();
}

EngineMetrics MetricsRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  sample_locked();
  EngineMetrics m = gauges_;
  m.total = counters_;
  const auto now = std::chrono::steady_clock::now();
  m.uptime_s = seconds_between(start_, now);
  const Sample& from = samples_.front();
  const double dt = seconds_between(from.t, now);
  if (dt > 0.05) {
    m.prompt_tps = static_cast<double>(counters_.prompt_rows - from.c.prompt_rows) / dt;
    m.gen_tps = static_cast<double>(counters_.generated_tokens - from.c.generated_tokens) / dt;
    m.steps_per_s = static_cast<double>(counters_.steps - from.c.steps) / dt;
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    m.cpu_util = (process_cpu_seconds() - from.cpu_s) / dt / cores;
  }
  return m;
}

}  // namespace ponder
