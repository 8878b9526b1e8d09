// Hash128: a 128-bit non-cryptographic hash (two independent 64-bit FNV-1a lanes) for cache keys
// and file fingerprints, where only accidental equality matters. Printed as 32 hex digits.
// Depends on fmt only.
#pragma once

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ponder {

class Hash128 {
 public:
  void add(const uint8_t* p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      a_ = (a_ ^ p[i]) * 1099511628211ull;
      b_ = (b_ ^ p[i]) * 0x100000001b3ull + 0x632be59bd9b4e019ull;
    }
  }
  void add(std::string_view s) { add(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }
  void add_u64(uint64_t v) {
    uint8_t buf[8];
    for (int i = 0; i < 8; ++i) buf[i] = static_cast<uint8_t>(v >> (8 * i));
    add(buf, 8);
  }
  std::string hex() const { return fmt::format("{:016x}{:016x}", a_, b_); }

 private:
  uint64_t a_ = 14695981039346656037ull;
  uint64_t b_ = 0x9e3779b97f4a7c15ull;
};

}  // namespace ponder
