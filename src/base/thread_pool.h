// ThreadPool: a fixed set of worker threads that run one parallel job at a time.
// run(fn) calls fn(thread_index, n_threads) on every thread (the caller is thread 0) and returns
// when all are done; parallel_for splits [0, n) into contiguous chunks, one per thread.
// Not re-entrant: a job must not call run() on the same pool.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ponder {

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
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
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int, int)>* job_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

// Number of worker threads to use by default: the physical cores (see cpu/topology.h for the
// refined count); here, the hardware concurrency as a fallback.
int default_thread_count();

}  // namespace ponder
