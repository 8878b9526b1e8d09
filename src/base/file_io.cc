#include "base/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace ponder {
namespace {

constexpr int64_t kPiece = int64_t{1} << 20;

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

uint64_t piece_hash(const uint8_t* p, int64_t n) {
  uint64_t h[4] = {0x243f6a8885a308d3ull, 0x13198a2e03707344ull, 0xa4093822299f31d0ull,
                   0x082efa98ec4e6c89ull};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = rotl(h[l] ^ w, 31) * 0x9e3779b97f4a7c15ull;
    }
  }
  for (; i < n; ++i) h[0] = rotl(h[0] ^ p[i], 31) * 0x9e3779b97f4a7c15ull;
  return rotl(h[0], 1) ^ rotl(h[1], 7) ^ rotl(h[2], 13) ^ rotl(h[3], 19) ^ static_cast<uint64_t>(n);
}

}  // namespace

bool pread_all(int fd, uint8_t* dst, int64_t n, int64_t offset) {
  while (n > 0) {
    const ssize_t got =
        ::pread(fd, dst, static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 30)), offset);
    if (got <= 0) return false;
    dst += got;
    n -= got;
    offset += got;
  }
  return true;
}

bool write_all(int fd, const uint8_t* src, int64_t n) {
  while (n > 0) {
    const ssize_t put =
        ::write(fd, src, static_cast<size_t>(std::min<int64_t>(n, int64_t{1} << 30)));
    if (put <= 0) return false;
    src += put;
    n -= put;
  }
  return true;
}

uint64_t checksum64(const uint8_t* p, int64_t n, ThreadPool* pool) {
  const int64_t pieces = (n + kPiece - 1) / kPiece;
  std::vector<uint64_t> h(static_cast<size_t>(pieces));
  auto run = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      h[static_cast<size_t>(i)] = piece_hash(p + i * kPiece, std::min(kPiece, n - i * kPiece));
  };
  if (pool != nullptr) {
    pool->parallel_for(pieces, 1, run);
  } else {
    run(0, pieces);
  }
  uint64_t all = static_cast<uint64_t>(n);
  for (uint64_t x : h) all = rotl(all ^ x, 31) * 0x9e3779b97f4a7c15ull;
  return all;
}

bool write_file_atomically(const std::string& path, const uint8_t* head, int64_t head_bytes,
                           const uint8_t* body, int64_t body_bytes) {
  static std::atomic<uint64_t> counter{0};
  const std::string tmp =
      path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = write_all(fd, head, head_bytes) && write_all(fd, body, body_bytes) && ::fsync(fd) == 0;
  int err = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    errno = err;
  }
  return ok;
}

}  // namespace ponder
