#include "cpu/numa_memory.h"

#include <linux/mempolicy.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

namespace ponder {

bool interleave_pages(void* p, size_t n, const std::vector<int>& nodes) {
  if (nodes.empty() || n == 0) return false;
  constexpr int kBits = static_cast<int>(sizeof(unsigned long) * CHAR_BIT);
  const int max_node = *std::max_element(nodes.begin(), nodes.end());
  if (*std::min_element(nodes.begin(), nodes.end()) < 0 || max_node >= 1024) return false;
  std::vector<unsigned long> mask(static_cast<size_t>(max_node / kBits + 1), 0);
  for (int node : nodes) mask[static_cast<size_t>(node / kBits)] |= 1UL << (node % kBits);
  // maxnode counts the mask's bits (the kernel ignores the last one: hence + 1).
  const unsigned long max_bits = static_cast<unsigned long>(mask.size()) * kBits + 1;
  return syscall(SYS_mbind, p, n, MPOL_INTERLEAVE, mask.data(), max_bits, 0) == 0;
}

int page_memory_policy(void* p) {
  int mode = -1;
  if (syscall(SYS_get_mempolicy, &mode, nullptr, 0, p, MPOL_F_ADDR) != 0) return -1;
  return mode;
}

}  // namespace ponder
