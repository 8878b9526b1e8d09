// NUMA placement of large allocations: spreading a region's pages over every memory node
// (MPOL_INTERLEAVE), so that on a machine with several nodes every thread, wherever it runs,
// streams the weights at the combined bandwidth of all the nodes' memory controllers, instead of
// every page landing on the node of the thread that happened to touch it first.
// Why interleave rather than first-touch by the computing thread: the matmul hands its output
// rows out dynamically (base/thread_pool.h parallel_for), so no thread owns a fixed set of rows.
// Depends on nothing but Linux (raw mbind/get_mempolicy system calls; no libnuma needed).
#pragma once

#include <cstddef>
#include <vector>

namespace ponder {

// Interleaves the pages of [p, p + n) (p page-aligned) over `nodes`, for the pages not yet
// touched. False, changing nothing, if nodes is empty or the kernel refuses (no NUMA support,
// a node that does not exist).
bool interleave_pages(void* p, size_t n, const std::vector<int>& nodes);

// The memory policy (MPOL_* of linux/mempolicy.h) governing the page at p, or -1 on error.
int page_memory_policy(void* p);

}  // namespace ponder
