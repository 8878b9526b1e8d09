// GgufWriter: builds a GGUF v3 file: metadata in insertion order, then tensors whose bytes are
// produced one tensor at a time by a callback (so a quantizer holds one tensor in memory).
// write() goes to "<path>.tmp" and renames on success; on any failure no file is left behind.
// Depends on base and gguf.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace ponder {

class GgufWriter {
 public:
  // Fills `out` (exactly the tensor's byte size) with the tensor's data.
  using Producer = std::function<Status(uint8_t* out, int64_t n_bytes)>;

  void set(const std::string& key, GgufValue value);  // replaces an existing key in place
  void remove(const std::string& key);
  void set_alignment(uint32_t alignment);  // also writes general.alignment
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }

  // shape in ggml order (shape[0] = row length); shape[0] must be a multiple of the block size.
  Status add_tensor(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                    Producer producer);
  // Convenience: copy `n_bytes` bytes from `data` (which must stay valid until write()).
  Status add_tensor_bytes(const std::string& name, GgmlType type, std::vector<int64_t> shape,
                          const void* data);

  // Called after each tensor is written: (index, count, name).
  void set_progress(std::function<void(size_t, size_t, const std::string&)> progress) {
    progress_ = std::move(progress);
  }

  Status write(const std::string& path) const;

 private:
  struct PendingTensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> shape;
    int64_t n_bytes;
    Producer producer;
  };
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::vector<PendingTensor> tensors_;
  uint32_t alignment_ = 32;
  std::function<void(size_t, size_t, const std::string&)> progress_;
};

}  // namespace ponder
