#include "model/kv_cache.h"

#include <algorithm>

namespace ponder {

KvCache::KvCache(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size)
    : n_layer_(n_layer), kv_dim_(kv_dim), n_blocks_(n_blocks), block_size_(block_size) {
  const size_t n = static_cast<size_t>(n_layer * n_blocks * block_size * kv_dim);
  k_.resize(n);
  v_.resize(n);
}

void KvCache::copy_block(int64_t src, int64_t dst, int64_t n_slots) {
  const size_t n = static_cast<size_t>(n_slots * kv_dim_);
  for (int64_t l = 0; l < n_layer_; ++l) {
    std::copy_n(&k_[index(l, src, 0)], n, &k_[index(l, dst, 0)]);
    std::copy_n(&v_[index(l, src, 0)], n, &v_[index(l, dst, 0)]);
  }
}

}  // namespace ponder
