// KvCache: the storage of keys and values, in fixed-size blocks of positions, for every layer.
// It knows nothing of sequences: the runtime decides which blocks a sequence owns and passes
// their ids in each Batch (block table), so blocks can be shared between sequences with a common
// prefix. Values are stored as f16, like llama.cpp's default cache.
// Depends on base.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ponder {

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t kv_dim, int64_t n_blocks, int64_t block_size);

  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  size_t bytes() const { return (k_.size() + v_.size()) * sizeof(uint16_t); }

  // Copies the first n_slots positions of block src into block dst, in every layer (copy on write
  // of a shared partial block).
  void copy_block(int64_t src, int64_t dst, int64_t n_slots);

  // The [kv_dim] f16 vector of key / value at (layer, block, slot).
  uint16_t* k(int64_t layer, int64_t block, int64_t slot) { return &k_[index(layer, block, slot)]; }
  uint16_t* v(int64_t layer, int64_t block, int64_t slot) { return &v_[index(layer, block, slot)]; }
  const uint16_t* k(int64_t layer, int64_t block, int64_t slot) const { return &k_[index(layer, block, slot)]; }
  const uint16_t* v(int64_t layer, int64_t block, int64_t slot) const { return &v_[index(layer, block, slot)]; }

 private:
  size_t index(int64_t layer, int64_t block, int64_t slot) const {
    return static_cast<size_t>(((layer * n_blocks_ + block) * block_size_ + slot) * kv_dim_);
  }
  int64_t n_layer_, kv_dim_, n_blocks_, block_size_;
  std::vector<uint16_t> k_;  // [n_layer, n_blocks, block_size, kv_dim]
  std::vector<uint16_t> v_;  // [n_layer, n_blocks, block_size, kv_dim]
};

}  // namespace ponder
