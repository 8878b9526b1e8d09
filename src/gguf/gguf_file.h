// GgufFile: a GGUF (v2, v3) file opened read-only through a memory map. The file is treated as
// hostile: every count, length, offset and size is checked against the file before use, so a
// broken file gives a Status that says what is wrong, never a crash or a huge allocation.
// Tensor data stays in the map; TensorInfo::data points into it.
// Depends on base and gguf/ggml_type.h.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_value.h"

namespace ponder {

struct TensorInfo {
  std::string name;
  GgmlType type;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length (innermost)
  uint64_t offset = 0;         // from the start of the data section
  int64_t n_elements = 0;
  int64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the map

  int64_t n_rows() const { return n_elements / shape[0]; }
  std::string shape_string() const;  // "[1536, 8960]"
};

class GgufFile {
 public:
  static Expected<GgufFile> open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing). The bytes must outlive the GgufFile.
  static Expected<GgufFile> parse(const uint8_t* data, size_t size, std::string name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }
  size_t file_size() const { return size_; }
  // True when the bytes are a memory map of the file (open), false for parse's in-memory image.
  bool is_mapped() const { return map_.data() != nullptr; }
  const MappedFile& mapping() const { return map_; }
  const uint8_t* bytes() const { return base_; }  // the whole file, [file_size()]

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;

  // Typed getters: "key qwen2.block_count: expected u32, found string" or "... missing".
  // Integer getters accept any integer type whose value fits.
  Expected<uint32_t> get_u32(std::string_view key) const;
  Expected<int64_t> get_i64(std::string_view key) const;
  Expected<float> get_f32(std::string_view key) const;  // accepts f32 and f64
  Expected<bool> get_bool(std::string_view key) const;
  Expected<std::string> get_string(std::string_view key) const;
  Expected<const std::vector<std::string>*> get_string_array(std::string_view key) const;
  Expected<std::vector<int32_t>> get_i32_array(std::string_view key) const;
  Expected<std::vector<float>> get_f32_array(std::string_view key) const;
  // The same, with a default when the key is missing (a wrong type is still an error).
  Expected<uint32_t> get_u32_or(std::string_view key, uint32_t dflt) const;
  Expected<float> get_f32_or(std::string_view key, float dflt) const;
  Expected<bool> get_bool_or(std::string_view key, bool dflt) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find_tensor(std::string_view name) const;

 private:
  MappedFile map_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::unordered_map<std::string, size_t> kv_index_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;

  friend class GgufParser;
};

}  // namespace ponder
