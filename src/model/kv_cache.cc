#include "model/kv_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ponder {

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}

void KvCache::Free::operator()(uint16_t* p) const { std::free(p); }

std::unique_ptr<uint16_t[], KvCache::Free> KvCache::allocate(size_t n) {
  const size_t bytes = std::max<size_t>((n * sizeof(uint16_t) + kHugePage - 1) / kHugePage * kHugePage, kHugePage);
  void* p = std::aligned_alloc(kHugePage, bytes);
  if (p == nullptr) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE);  // a hint: fewer TLB misses over a long context
#endif
  std::memset(p, 0, bytes);
  return std::unique_ptr<uint16_t[], Free>(static_cast<uint16_t*>(p));
}

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_blocks, int64_t block_size)
    : n_layer_(n_layer),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      n_blocks_(n_blocks),
      block_size_(block_size),
      n_values_(static_cast<size_t>(n_layer * n_blocks * n_head_kv * block_size * head_dim)),
      k_(allocate(n_values_)),
      v_(allocate(n_values_)) {}

void KvCache::copy_block(int64_t src, int64_t dst, int64_t n_slots) {
  const size_t n = static_cast<size_t>(n_slots * head_dim_);
  for (int64_t l = 0; l < n_layer_; ++l) {
    for (int64_t h = 0; h < n_head_kv_; ++h) {
      std::copy_n(k(l, src, h, 0), n, k(l, dst, h, 0));
      std::copy_n(v(l, src, h, 0), n, v(l, dst, h, 0));
    }
  }
}

}  // namespace ponder
