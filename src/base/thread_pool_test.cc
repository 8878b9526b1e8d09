#include "base/thread_pool.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
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

// Pieces shrink with what is left (guided): the thread that stalls in the first piece holds only
// that piece, the other takes all the rest, and the last pieces are one chunk (grain) each.
TEST(ThreadPoolTest, ParallelForPiecesShrinkAroundAStalledThread) {
  ThreadPool pool(2);
  const int64_t n = 1001, grain = 16, n_chunks = (n + grain - 1) / grain;
  struct Piece {
    int64_t begin, end;
    std::thread::id thread;
  };
  std::mutex mu;
  std::vector<Piece> pieces;  // in the order taken
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu);
      first = pieces.empty();
      pieces.push_back({b, e, std::this_thread::get_id()});
    }
    if (first) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  });
  ASSERT_GE(pieces.size(), 2u);
  const Piece stalled = pieces.front();
  EXPECT_EQ(stalled.begin, 0);
  EXPECT_LE(stalled.end, n_chunks / 4 * grain);  // a quarter of the chunks with 2 threads
  for (size_t i = 1; i < pieces.size(); ++i) EXPECT_NE(pieces[i].thread, stalled.thread);
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  int64_t at = 0;
  for (const Piece& p : pieces) {
    ASSERT_EQ(p.begin, at);  // every index once, in pieces of whole chunks
    ASSERT_TRUE(p.end == n || (p.end - p.begin) % grain == 0);
    at = p.end;
  }
  EXPECT_EQ(at, n);
  EXPECT_EQ(pieces.back().end - pieces.back().begin, n - (n_chunks - 1) * grain);  // one chunk
  EXPECT_EQ(pieces[pieces.size() - 2].end - pieces[pieces.size() - 2].begin, grain);
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

namespace ponder {
namespace {

TEST(ThreadPoolTest, PinnedThreadsRunOnTheirCpus) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  int first_cpu = -1;
  for (int c = 0; c < CPU_SETSIZE && first_cpu < 0; ++c) {
    if (CPU_ISSET(c, &saved)) first_cpu = c;
  }
  {
    ThreadPool pool(3, {first_cpu});
    std::vector<int> cpus(3, -1);
    pool.run([&](int ti, int) { cpus[ti] = sched_getcpu(); });
    for (int c : cpus) EXPECT_EQ(c, first_cpu);
  }
  sched_setaffinity(0, sizeof saved, &saved);  // the calling thread was pinned too
}

}  // namespace
}  // namespace ponder
