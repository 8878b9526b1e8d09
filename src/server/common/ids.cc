#include "server/common/ids.h"

#include <fmt/core.h>

#include <chrono>
#include <random>

namespace ponder::server {

uint64_t random_u64() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng();
}

std::string random_hex(int digits) {
  std::string s;
  while (static_cast<int>(s.size()) < digits) s += fmt::format("{:016x}", random_u64());
  s.resize(static_cast<size_t>(digits));
  return s;
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ponder::server
