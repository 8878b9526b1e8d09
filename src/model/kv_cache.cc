#include "model/kv_cache.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "gguf/ggml_type.h"
#include "kernels/dot_ggml_order.h"
#include "quant/quantize.h"

namespace ponder {

const char* kv_type_name(KvType t) {
  return t == KvType::kQ8_0 ? "q8_0" : t == KvType::kBF16 ? "bf16" : "f16";
}

Expected<KvType> parse_kv_type(std::string_view name) {
  if (name == "f16") return KvType::kF16;
  if (name == "q8_0") return KvType::kQ8_0;
  if (name == "bf16") return KvType::kBF16;
  return Status::errorf("KV cache type '{}': expected f16, bf16 or q8_0", name);
}

namespace {
GgmlType ggml_type_of(KvType t) {
  return t == KvType::kQ8_0 ? GgmlType::Q8_0 : t == KvType::kBF16 ? GgmlType::BF16 : GgmlType::F16;
}
}  // namespace

int64_t kv_row_bytes(KvType t, int64_t head_dim) {
  return ggml_row_bytes(ggml_type_of(t), head_dim);
}

HugePages KvCache::allocate(size_t n) {
  HugePages p = alloc_huge_pages(n);  // fewer TLB misses over a long context
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p.get(), 0, n);
  return p;
}

KvCache::KvCache(int64_t n_layer, int64_t n_head_kv, int64_t head_dim, int64_t n_blocks,
                 int64_t block_size, KvType k_type, KvType v_type)
    : n_layer_(n_layer),
      n_head_kv_(n_head_kv),
      head_dim_(head_dim),
      n_blocks_(n_blocks),
      block_size_(block_size),
      k_type_(k_type),
      v_type_(v_type),
      k_row_(kv_row_bytes(k_type, head_dim)),
      v_row_(kv_row_bytes(v_type, head_dim)),
      n_rows_(static_cast<size_t>(n_layer * n_blocks * n_head_kv * block_size)),
      k_(allocate(n_rows_ * static_cast<size_t>(k_row_))),
      v_(allocate(n_rows_ * static_cast<size_t>(v_row_))) {}

void KvCache::copy_block(int64_t src, int64_t dst, int64_t n_slots) {
  for (int64_t l = 0; l < n_layer_; ++l) {
    for (int64_t h = 0; h < n_head_kv_; ++h) {
      std::memcpy(k_row(l, dst, h, 0), k_row(l, src, h, 0), static_cast<size_t>(n_slots * k_row_));
      std::memcpy(v_row(l, dst, h, 0), v_row(l, src, h, 0), static_cast<size_t>(n_slots * v_row_));
    }
  }
}

// Rows are rounded as llama.cpp rounds its cache (fp32_to_fp16, quantize_row_q8_0) and read back
// with the file formats' dequantizers.
void KvCache::store_k(int64_t layer, int64_t block, int64_t head, int64_t slot, const float* x) {
  quantize_activation_row(ggml_type_of(k_type_), x, k_row(layer, block, head, slot), head_dim_);
}
void KvCache::store_v(int64_t layer, int64_t block, int64_t head, int64_t slot, const float* x) {
  quantize_activation_row(ggml_type_of(v_type_), x, v_row(layer, block, head, slot), head_dim_);
}
void KvCache::load_k(int64_t layer, int64_t block, int64_t head, int64_t slot, float* out) const {
  dequantize_row(ggml_type_of(k_type_), k_row(layer, block, head, slot), out, head_dim_);
}
void KvCache::load_v(int64_t layer, int64_t block, int64_t head, int64_t slot, float* out) const {
  dequantize_row(ggml_type_of(v_type_), v_row(layer, block, head, slot), out, head_dim_);
}

}  // namespace ponder
