#include "base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace ponder {
namespace {

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      pool.parallel_for(n, 4, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
    }
  }
}

TEST(ThreadPoolTest, RunReachesEveryThreadRepeatedly) {
  ThreadPool pool(4);
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> mask{0};
    pool.run([&](int ti, int nt) {
      EXPECT_EQ(nt, 4);
      mask |= 1 << ti;
    });
    ASSERT_EQ(mask.load(), 0xF);
  }
}

}  // namespace
}  // namespace ponder

namespace ponder {
namespace {

// Workers that fell asleep after a quiet spell still wake for the next job.
TEST(ThreadPoolTest, WakesAfterSleeping) {
  ThreadPool pool(3);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::atomic<int> count{0};
    pool.run([&](int, int) { count++; });
    ASSERT_EQ(count.load(), 3);
  }
}

}  // namespace
}  // namespace ponder
