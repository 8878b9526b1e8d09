#include "runtime/serving_bench.h"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <random>
#include <thread>

namespace ponder {
namespace {

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i =
      std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

}  // namespace

Expected<ServingBenchResult> run_serving_bench(Engine& engine, int32_t n_vocab,
                                               int32_t n_concurrent, int32_t n_prompt,
                                               int32_t n_gen, int32_t late_prompt, uint64_t seed,
                                               std::shared_ptr<grammar::Grammar> grammar) {
  if (n_concurrent < 1 || n_prompt < 1 || n_gen < 1) {
    return Status::errorf("--concurrent {}, --prompt {}, --gen {}: each must be at least 1",
                          n_concurrent, n_prompt, n_gen);
  }
  std::mt19937_64 rng(seed);
  auto make = [&](int32_t prompt_len, int32_t gen) {
    EngineRequest r;
    for (int32_t i = 0; i < prompt_len; ++i)
      r.prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab)));
    r.options.max_tokens = gen;
    r.options.sampling.temperature = 0;
    r.options.stop_at_eog = false;
    return r;
  };
  // Warm-up: touches the weights and grows the activation buffers.
  {
    EngineRequest w = make(std::min(n_prompt, 32), 4);
    w.sink = [](EngineEvent&&) {};
    PONDER_RETURN_IF_ERROR(engine.submit(std::move(w)).status());
    engine.wait_idle();
  }

  std::mutex mu;
  std::vector<std::vector<Clock::time_point>> times(static_cast<size_t>(n_concurrent));
  const int64_t preempted_before = engine.metrics().total.preemptions;
  const double cpu_before = process_cpu_seconds();
  const Clock::time_point start = Clock::now();
  for (int32_t i = 0; i < n_concurrent; ++i) {
    EngineRequest r = make(n_prompt, n_gen);
    r.options.grammar = grammar;
    r.sink = [&, i](EngineEvent&& ev) {
      if (ev.kind != EngineEvent::Kind::kToken) return;
      std::lock_guard<std::mutex> lock(mu);
      times[static_cast<size_t>(i)].push_back(Clock::now());
    };
    PONDER_RETURN_IF_ERROR(engine.submit(std::move(r)).status());
  }
  Clock::time_point late_at{}, late_first{};
  if (late_prompt > 0) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (std::all_of(times.begin(), times.end(), [](const auto& t) { return t.size() >= 2; }))
          break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    EngineRequest r = make(late_prompt, 1);
    r.sink = [&](EngineEvent&& ev) {
      if (ev.kind != EngineEvent::Kind::kToken) return;
      std::lock_guard<std::mutex> lock(mu);
      late_first = Clock::now();
    };
    late_at = Clock::now();
    PONDER_RETURN_IF_ERROR(engine.submit(std::move(r)).status());
  }
  engine.wait_idle();
  const Clock::time_point end = Clock::now();
  auto secs = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };

  ServingBenchResult res;
  res.n_concurrent = n_concurrent;
  res.n_prompt = n_prompt;
  res.n_gen = n_gen;
  res.total_s = secs(start, end);
  res.late_prompt = late_prompt;
  if (late_prompt > 0) res.late_ttft_s = secs(late_at, late_first);
  res.preemptions = engine.metrics().total.preemptions - preempted_before;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  res.cpu_util = (process_cpu_seconds() - cpu_before) / res.total_s / cores;
  std::vector<double> ttft, latency;
  Clock::time_point all_started = start;
  int64_t n_tokens = 0;
  for (const auto& t : times) {
    if (t.empty()) return Status::error("a benchmark request produced no token");
    ttft.push_back(secs(start, t.front()));
    latency.push_back(secs(start, t.back()));
    all_started = std::max(all_started, t.front());
    for (size_t k = 1; k < t.size(); ++k)
      res.max_gap_s = std::max(res.max_gap_s, secs(t[k - 1], t[k]));
    n_tokens += static_cast<int64_t>(t.size());
  }
  int64_t after = 0;
  Clock::time_point last = all_started;
  for (const auto& t : times) {
    for (const auto& x : t) after += x > all_started;
    last = std::max(last, t.back());
  }
  const double decode_s = secs(all_started, last);
  res.gen_tps = decode_s > 0 ? static_cast<double>(after) / decode_s : 0;
  res.total_tps = static_cast<double>(n_tokens) / res.total_s;
  res.ttft_p50_s = percentile(ttft, 0.5);
  res.ttft_p95_s = percentile(ttft, 0.95);
  res.latency_p50_s = percentile(latency, 0.5);
  res.latency_p95_s = percentile(latency, 0.95);
  return res;
}

}  // namespace ponder
