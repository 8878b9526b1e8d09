#include "model/kv_cache.h"

namespace ponder {

KvCache::KvCache(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size)
    : n_layer_(n_layer), kv_dim_(kv_dim), n_blocks_(n_blocks), block_size_(block_size) {
  const size_t n = static_cast<size_t>(n_layer * n_blocks * block_size * kv_dim);
  k_.resize(n);
  v_.resize(n);
}

}  // namespace ponder
