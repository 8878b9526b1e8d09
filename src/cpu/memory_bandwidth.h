// Measures the machine's memory read bandwidth: the roofline that decode speed is judged against
// (generating a token reads every weight once).
// Depends on base.
#pragma once

#include "base/thread_pool.h"

namespace ponder {

// Best of `reps` timed passes reading a `bytes`-sized buffer with every thread of the pool; GB/s.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{1} << 30, int reps = 5);

// Peak resident set size of this process, in bytes.
size_t peak_rss_bytes();

}  // namespace ponder
