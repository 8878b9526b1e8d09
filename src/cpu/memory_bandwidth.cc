#include "cpu/memory_bandwidth.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "base/timer.h"

namespace ponder {

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int reps) {
  const size_t n = bytes / sizeof(uint64_t);
  std::unique_ptr<uint64_t[]> buf(new uint64_t[n]);
  // Each thread first-touches its own part, as the model's weights are touched by the threads
  // that read them.
  pool.parallel_for(static_cast<int64_t>(n), 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) buf[i] = static_cast<uint64_t>(i);
  });
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()) * 8);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    pool.run([&](int ti, int nt) {
      const size_t b = n * ti / nt, e = n * (ti + 1) / nt;
      // Eight independent accumulators so the loop is bound by loads, not by adds.
      uint64_t s[8] = {};
      size_t i = b;
      for (; i + 8 <= e; i += 8) {
        for (int k = 0; k < 8; ++k) s[k] ^= buf[i + k];
      }
      for (; i < e; ++i) s[0] ^= buf[i];
      for (int k = 0; k < 8; ++k) sinks[static_cast<size_t>(ti) * 8 + k] = s[k];
    });
    best = std::max(best, static_cast<double>(bytes) / t.seconds() / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sinks) keep = keep ^ v;
  (void)keep;
  return best;
}

size_t peak_rss_bytes() {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;
}

}  // namespace ponder
