// Memory in 2 MiB pages where the kernel gives them (transparent huge pages in "madvise" mode, the
// default of most distributions), for the large buffers that are written soon after they are
// made: the x16 weights, the KV cache, the disk tier's copies. Each 4 KiB page costs a fault when
// first touched, and faults are slow in virtual machines: 114 MB touched a page at a time took
// 415 ms on a 2-core cloud VM, in 2 MiB pages 8-36 ms once the host had backed them. Depends on
// nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ponder {

inline constexpr size_t kHugePage = size_t{2} << 20;

struct HugePagesFree {
  void operator()(uint8_t* p) const;
};
using HugePages = std::unique_ptr<uint8_t[], HugePagesFree>;

// At least `bytes` (rounded up to whole 2 MiB pages, at least one), aligned to 2 MiB, with the
// huge-page hint given; not zeroed. Null when out of memory.
HugePages alloc_huge_pages(size_t bytes);

}  // namespace ponder
