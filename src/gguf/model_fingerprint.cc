#include "gguf/model_fingerprint.h"

#include <algorithm>

#include <fmt/core.h>

namespace ponder {

namespace {

// Two independent 64-bit FNV-1a lanes: 128 bits, plenty against accidental equality.
struct Hash128 {
  uint64_t a = 14695981039346656037ull, b = 1099511628211ull ^ 0x9e3779b97f4a7c15ull;
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      a = (a ^ p[i]) * 1099511628211ull;
      b = (b ^ p[i]) * 0x100000001b3ull + 0x632be59bd9b4e019ull;
    }
  }
  void add_u64(uint64_t v) {
    uint8_t buf[8];
    for (int i = 0; i < 8; ++i) buf[i] = static_cast<uint8_t>(v >> (8 * i));
    add(buf, 8);
  }
};

}  // namespace

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
  return fmt::format("{:016x}{:016x}", h.a, h.b);
}

}  // namespace ponder
