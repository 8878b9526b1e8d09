// Safetensors reading: one memory-mapped .safetensors file (SafetensorsFile), or the set of
// tensors of a Hugging Face model folder (SafetensorsSet: model.safetensors, or the shards named
// by model.safetensors.index.json). The files are treated as hostile: the header length, the JSON
// header, every dtype, shape and data offset is checked against the file before use, so a broken
// file gives a Status naming the file and the tensor, never a crash. Tensor data stays in the map.
// Also the writer the GGUF -> HF export uses (one file, tensors in the order given).
// Depends on base and nlohmann_json only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/mapped_file.h"
#include "base/status.h"

namespace ponder {

// The element types Ponder converts from; other safetensors dtypes are refused by name.
enum class StDtype { kF32, kF16, kBF16 };
const char* st_dtype_name(StDtype dtype);
int64_t st_dtype_size(StDtype dtype);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;  // Hugging Face (PyTorch) order: shape[0] is the outermost
  int64_t n_elements = 0;
  int64_t n_bytes = 0;
  const uint8_t* data = nullptr;  // into the map; not necessarily aligned
  std::string file;               // the file holding it (for messages)
};

class SafetensorsFile {
 public:
  static Expected<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (tests, fuzzing); the bytes must outlive the object.
  static Expected<SafetensorsFile> parse(const uint8_t* data, size_t size, std::string name);

  const std::string& path() const { return path_; }
  const std::vector<StTensor>& tensors() const { return tensors_; }

 private:
  MappedFile map_;
  std::string path_;
  std::vector<StTensor> tensors_;
};

class SafetensorsSet {
 public:
  // dir/model.safetensors.index.json (sharded), else dir/model.safetensors, else every
  // dir/*.safetensors in name order. A tensor found twice is an error.
  static Expected<SafetensorsSet> open_dir(const std::string& dir);

  const StTensor* find(const std::string& name) const;
  const std::vector<const StTensor*>& tensors() const { return order_; }
  size_t n_files() const { return files_.size(); }

 private:
  Status add_file(std::unique_ptr<SafetensorsFile> file);

  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<const StTensor*> order_;
  std::unordered_map<std::string, const StTensor*> by_name_;
};

// One tensor to write: bytes in `dtype`, HF-order shape.
struct StWriteTensor {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // n_elements * dtype size bytes
};

// Writes a .safetensors file (header padded to 8 bytes with spaces, as the reference writer does).
Status write_safetensors(const std::string& path, const std::vector<StWriteTensor>& tensors);

}  // namespace ponder
