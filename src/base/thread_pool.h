// ThreadPool: a fixed set of worker threads that run one parallel job at a time, built for the
// forward pass, which runs hundreds of short jobs per token: between jobs workers spin briefly
// (a wake-up then costs well under a microsecond instead of a futex round trip), and only after
// a quiet spell do they sleep on a condition variable, so an idle server burns no CPU.
// run(fn) calls fn(thread_index, n_threads) on every thread (the caller is thread 0) and returns
// when all are done; parallel_for splits [0, n) into contiguous chunks, one per thread.
// Not re-entrant: a job must not call run() on the same pool.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ponder {

class ThreadPool {
 public:
  // pin_cpus: when not empty, thread i runs only on pin_cpus[i % size] (the calling thread, which
  // is thread 0, is pinned too, from the constructor on).
  explicit ThreadPool(int n_threads, std::vector<int> pin_cpus = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // fn(thread_index, n_threads) on every thread, the calling thread included.
  void run(const std::function<void(int, int)>& fn);

  // fn(begin, end) over contiguous chunks of [0, n); chunks are multiples of `grain`.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  void worker_loop(int index);

  int n_threads_;
  std::vector<std::thread> workers_;
  // Written by run() before generation_ is bumped; read by workers after they see the bump.
  const std::function<void(int, int)>* job_ = nullptr;
  alignas(64) std::atomic<uint64_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable wake_cv_;
};

// Number of worker threads to use by default when the caller knows nothing better (see
// cpu/topology.h for the physical-core count the commands use).
int default_thread_count();

}  // namespace ponder
