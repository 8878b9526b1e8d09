// KvCache: the storage of keys and values, in fixed-size blocks of positions, for every layer.
// It knows nothing of sequences: the runtime decides which blocks a sequence owns and passes
// their ids in each Batch (block table), so blocks can be shared between sequences with a common
// prefix. Each of K and V is stored as f16 (like llama.cpp's cache), bf16 (K and V together: what
// the bf16 attention kernels read without conversion; the default where they run natively) or Q8_0
// (`--cache-type-k/-v q8_0`: 34 bytes per 32 values, llama.cpp's quantizer, 53% of f16's bytes).
//
// Layout: [n_layer][n_head_kv][n_blocks][block_size] rows of head_dim values for K and for V, so
// one KV head's block is one contiguous run (4 KiB in f16 for 16 positions of head_dim 128), and a
// sequence whose blocks have consecutive ids is one contiguous stream per layer and head: attention
// reads it at the speed of a sequential read (measured on one core: 33 GB/s, against 10 GB/s for
// 4 KiB runs every 8 KiB, as with the heads interleaved). Aligned to 2 MiB and asked for in huge
// pages. Depends on kernels (llama.cpp's row quantizers), quant (the dequantizers), gguf, base.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/huge_pages.h"
#include "base/status.h"

namespace ponder {

// bf16 (K and V together, the block order only): the layout of f16, rows of bf16 values that the
// bf16 kernels read with no conversion (kernels/block_attention.h).
enum class KvType : uint8_t { kF16, kQ8_0, kBF16 };

const char* kv_type_name(KvType t);  // "f16", "q8_0", "bf16"
Expected<KvType> parse_kv_type(std::string_view name);
// Bytes of one row of head_dim values (Q8_0 needs head_dim % 32 == 0).
int64_t kv_row_bytes(KvType t, int64_t head_dim);

class KvCache {
 public:
  KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_blocks,
          int64_t block_size, KvType k_type = KvType::kF16, KvType v_type = KvType::kF16);

  int64_t n_layer() const { return n_layer_; }
  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t n_head_kv() const { return n_head_kv_; }
  int64_t head_dim() const { return head_dim_; }
  KvType k_type() const { return k_type_; }
  KvType v_type() const { return v_type_; }
  size_t bytes() const { return n_rows_ * static_cast<size_t>(k_row_ + v_row_); }
  int64_t k_row_bytes() const { return k_row_; }  // kv_row_bytes(k_type(), head_dim)
  int64_t v_row_bytes() const { return v_row_; }

  // Copies the first n_slots positions of block src into block dst, in every layer and head (copy
  // on write of a shared partial block).
  void copy_block(int64_t src, int64_t dst, int64_t n_slots);

  // The stored row (k_type / v_type, kv_row_bytes) of KV head `head` at (layer, block, slot); the
  // slots of one (layer, block, head) follow each other.
  uint8_t* k_row(int64_t layer, int64_t block, int64_t head, int64_t slot) {
    return k_.get() + index(layer, block, head, slot) * k_row_;
  }
  uint8_t* v_row(int64_t layer, int64_t block, int64_t head, int64_t slot) {
    return v_.get() + index(layer, block, head, slot) * v_row_;
  }
  const uint8_t* k_row(int64_t layer, int64_t block, int64_t head, int64_t slot) const {
    return k_.get() + index(layer, block, head, slot) * k_row_;
  }
  const uint8_t* v_row(int64_t layer, int64_t block, int64_t head, int64_t slot) const {
    return v_.get() + index(layer, block, head, slot) * v_row_;
  }

  // The f16 rows of an f16 cache (llama.cpp's attention order reads them directly).
  uint16_t* k(int64_t layer, int64_t block, int64_t head, int64_t slot) {
    return reinterpret_cast<uint16_t*>(k_row(layer, block, head, slot));
  }
  uint16_t* v(int64_t layer, int64_t block, int64_t head, int64_t slot) {
    return reinterpret_cast<uint16_t*>(v_row(layer, block, head, slot));
  }
  const uint16_t* k(int64_t layer, int64_t block, int64_t head, int64_t slot) const {
    return reinterpret_cast<const uint16_t*>(k_row(layer, block, head, slot));
  }
  const uint16_t* v(int64_t layer, int64_t block, int64_t head, int64_t slot) const {
    return reinterpret_cast<const uint16_t*>(v_row(layer, block, head, slot));
  }

  // head_dim floats rounded to the row's type, and back.
  void store_k(int64_t layer, int64_t block, int64_t head, int64_t slot, const float* x);
  void store_v(int64_t layer, int64_t block, int64_t head, int64_t slot, const float* x);
  void load_k(int64_t layer, int64_t block, int64_t head, int64_t slot, float* out) const;
  void load_v(int64_t layer, int64_t block, int64_t head, int64_t slot, float* out) const;

 private:
  size_t index(int64_t layer, int64_t block, int64_t head, int64_t slot) const {
    return static_cast<size_t>(((layer * n_head_kv_ + head) * n_blocks_ + block) * block_size_ +
                               slot);
  }
  static HugePages allocate(size_t bytes);

  int64_t n_layer_, n_head_kv_, head_dim_, n_blocks_, block_size_;
  KvType k_type_, v_type_;
  int64_t k_row_, v_row_;  // bytes per row
  size_t n_rows_;
  HugePages k_;  // [n_layer, n_head_kv, n_blocks, block_size] rows
  HugePages v_;  // same
};

}  // namespace ponder
