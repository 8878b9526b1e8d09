// Measures the machine's memory read bandwidth: the roofline that decode speed is judged against
// (generating a token reads every weight once).
// Depends on base.
#pragma once

#include "base/thread_pool.h"

namespace ponder {

// Best of `reps` timed passes reading a `bytes`-sized buffer with every thread of the pool; GB/s.
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{1} << 30, int reps = 5);

// The same in a child process with its own pool of n_threads (in-process if fork fails): its
// buffer never counts in this process's peak RSS, so it can run before a model loads, on memory
// the model has not fragmented. Call it before this process starts threads.
double measure_read_bandwidth_gbs_apart(int n_threads);

// Peak resident set size of this process, in bytes.
size_t peak_rss_bytes();

}  // namespace ponder
