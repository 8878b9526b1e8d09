#include "gguf/model_fingerprint.h"

#include <algorithm>

#include "base/hash128.h"

namespace ponder {

std::string model_fingerprint(const GgufFile& file) {
  const uint8_t* bytes = file.bytes();
  const uint64_t size = file.file_size();
  const uint64_t data = std::min<uint64_t>(file.data_offset(), size);
  Hash128 h;
  h.add_u64(size);
  h.add(bytes, static_cast<size_t>(data));
  constexpr uint64_t kBlock = 4096, kSamples = 16;
  const uint64_t span = size - data;
  for (uint64_t i = 0; i < kSamples && span > 0; ++i) {
    const uint64_t off = data + (span > kBlock ? (span - kBlock) * i / (kSamples - 1) : 0);
    h.add(bytes + off, static_cast<size_t>(std::min(kBlock, size - off)));
  }
  return h.hex();
}

}  // namespace ponder
