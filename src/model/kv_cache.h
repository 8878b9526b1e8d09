// KvCache: the storage of keys and values, in fixed-size blocks of positions, for every layer.
// It knows nothing of sequences: the runtime decides which blocks a sequence owns and passes
// their ids in each Batch (block table), so blocks can be shared between sequences with a common
// prefix. Values are stored as f16, like llama.cpp's default cache.
//
// Layout: [n_layer][n_head_kv][n_blocks][block_size][head_dim] for K and for V, so one KV head's
// block is one contiguous run (4 KiB for 16 positions of head_dim 128), and a sequence whose blocks
// have consecutive ids is one contiguous stream per layer and head: attention reads it at the
// speed of a sequential read (measured on one core: 33 GB/s, against 10 GB/s for 4 KiB runs
// every 8 KiB, as with the heads interleaved). Aligned to 2 MiB and asked for in huge pages.
// Depends on base.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ponder {

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_blocks, int64_t block_size);

  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_head_kv() const { return n_head_kv_; }
  int64_t head_dim() const { return head_dim_; }
  size_t bytes() const { return 2 * n_values_ * sizeof(uint16_t); }

  // Copies the first n_slots positions of block src into block dst, in every layer and head (copy
  // on write of a shared partial block).
  void copy_block(int64_t src, int64_t dst, int64_t n_slots);

  // The [head_dim] f16 key / value of KV head `head` at (layer, block, slot); the slots of one
  // (layer, block, head) follow each other: k(l, b, h, 0) is that head's [block_size][head_dim].
  uint16_t* k(int64_t layer, int64_t block, int64_t head, int64_t slot) { return k_.get() + index(layer, block, head, slot); }
  uint16_t* v(int64_t layer, int64_t block, int64_t head, int64_t slot) { return v_.get() + index(layer, block, head, slot); }
  const uint16_t* k(int64_t layer, int64_t block, int64_t head, int64_t slot) const { return k_.get() + index(layer, block, head, slot); }
  const uint16_t* v(int64_t layer, int64_t block, int64_t head, int64_t slot) const { return v_.get() + index(layer, block, head, slot); }

 private:
  struct Free {
    void operator()(uint16_t* p) const;
  };
  size_t index(int64_t layer, int64_t block, int64_t head, int64_t slot) const {
    return static_cast<size_t>((((layer * n_head_kv_ + head) * n_blocks_ + block) * block_size_ + slot) * head_dim_);
  }
  static std::unique_ptr<uint16_t[], Free> allocate(size_t n);

  int64_t n_layer_, n_head_kv_, head_dim_, n_blocks_, block_size_;
  size_t n_values_;
  std::unique_ptr<uint16_t[], Free> k_;  // [n_layer, n_head_kv, n_blocks, block_size, head_dim]
  std::unique_ptr<uint16_t[], Free> v_;  // same
};

}  // namespace ponder
