#include "base/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace ponder {

void HugePagesFree::operator()(uint8_t* p) const { std::free(p); }

HugePages alloc_huge_pages(size_t bytes) {
  const size_t rounded =
      std::max<size_t>((bytes + kHugePage - 1) / kHugePage * kHugePage, kHugePage);
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (p == nullptr) return nullptr;
#if defined(MADV_HUGEPAGE)
  madvise(p, rounded, MADV_HUGEPAGE);  // a hint: the kernel may still give 4 KiB pages
#endif
  return HugePages(static_cast<uint8_t*>(p));
}

}  // namespace ponder
