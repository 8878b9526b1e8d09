#include "model/x16_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/file_io.h"
#include "base/log.h"

namespace ponder {
namespace {

constexpr char kMagic[8] = {'P', 'O', 'N', 'D', 'X', '1', '6', '\0'};
constexpr uint32_t kVersion = 1;
constexpr int64_t kHeaderBytes = 4096;  // the copies start page-aligned

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;
  char fingerprint[32];
  char layout[32];
  int64_t bytes;
  uint64_t checksum;
};

void fill(char* dst, const std::string& s) {
  std::memset(dst, 0, 32);
  std::memcpy(dst, s.data(), std::min<size_t>(32, s.size()));
}

}  // namespace

X16CacheOptions x16_cache_default() {
  X16CacheOptions o;
  if (const char* gib = std::getenv("PONDER_X16_CACHE_GIB"); gib != nullptr && *gib != '\0') {
    char* end = nullptr;
    const double v = std::strtod(gib, &end);
    if (end != gib && *end == '\0' && v >= 0) {
      o.max_bytes = static_cast<int64_t>(v * double(int64_t{1} << 30));
    } else {
      log_warn("PONDER_X16_CACHE_GIB='{}' is not a size in GiB: the default bound is kept", gib);
    }
  }
  if (const char* env = std::getenv("PONDER_X16_CACHE"); env != nullptr && *env != '\0') {
    if (const std::string v = env; v != "0" && v != kX16CacheOff) o.dir = v;
    return o;
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    o.dir = std::string(xdg) + "/ponder/x16";
  } else if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    o.dir = std::string(home) + "/.cache/ponder/x16";
  }
  return o;
}

std::string x16_cache_path(const X16CacheOptions& opts, const std::string& fingerprint,
                           const std::string& layout) {
  return (std::filesystem::path(opts.dir) / (fingerprint + "-" + layout.substr(0, 16) + ".x16"))
      .string();
}

namespace {

struct CacheFile {
  std::filesystem::path path;
  int64_t bytes = 0;
  std::filesystem::file_time_type used;
};

// The complete cache files in dir (temporary ones being written are not counted).
std::vector<CacheFile> cache_files(const std::string& dir) {
  std::vector<CacheFile> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".x16") continue;
    std::error_code fe;
    const auto size = e.file_size(fe);
    const auto time = e.last_write_time(fe);
    if (!fe) out.push_back({e.path(), static_cast<int64_t>(size), time});
  }
  return out;
}

}  // namespace

X16CacheUsage x16_cache_usage(const std::string& dir, const std::string& fingerprint) {
  X16CacheUsage u;
  for (const CacheFile& f : cache_files(dir)) {
    u.files++;
    u.bytes += f.bytes;
    if (!fingerprint.empty() && f.path.filename().string().rfind(fingerprint + "-", 0) == 0) {
      u.model_files++;
      u.model_bytes += f.bytes;
    }
  }
  return u;
}

bool x16_cache_make_room(const X16CacheOptions& opts, const std::string& path, int64_t bytes) {
  const int64_t need = kHeaderBytes + bytes;
  if (need > opts.max_bytes) {
    log_info(
        "x16 cache: this model's copy ({:.2f} GB) is larger than the bound ({:.2f} GB, "
        "--x16-cache-size): not written",
        need / 1e9, opts.max_bytes / 1e9);
    return false;
  }
  std::error_code ec;
  std::filesystem::create_directories(opts.dir, ec);
  std::vector<CacheFile> files = cache_files(opts.dir);
  std::sort(files.begin(), files.end(),
            [](const CacheFile& a, const CacheFile& b) { return a.used < b.used; });
  int64_t total = 0;
  for (const CacheFile& f : files)
    if (f.path != std::filesystem::path(path)) total += f.bytes;
  for (const CacheFile& f : files) {  // the least recently used first
    if (total + need <= opts.max_bytes) break;
    if (f.path == std::filesystem::path(path)) continue;
    std::error_code re;
    if (std::filesystem::remove(f.path, re)) {
      total -= f.bytes;
      log_info("x16 cache: removed {} ({:.2f} GB, the least recently used) to stay under {:.2f} GB",
               f.path.string(), f.bytes / 1e9, opts.max_bytes / 1e9);
    }
  }
  if (total + need > opts.max_bytes) return false;
  const std::filesystem::space_info sp = std::filesystem::space(opts.dir, ec);
  if (!ec && sp.capacity > 0 &&
      static_cast<double>(sp.available) - static_cast<double>(need) <
          opts.min_free_share * static_cast<double>(sp.capacity)) {
    log_warn(
        "x16 cache: writing {:.2f} GB would leave less than {:.0f}% of the disk free: not "
        "written; the next start interleaves again",
        need / 1e9, opts.min_free_share * 100);
    return false;
  }
  return true;
}

bool x16_cache_read(const std::string& path, const std::string& fingerprint,
                    const std::string& layout, uint8_t* region, int64_t bytes, ThreadPool& pool) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;  // not written yet: the usual first start
  struct stat st {};
  Header h{};
  bool ok = ::fstat(fd, &st) == 0 && st.st_size == kHeaderBytes + bytes &&
            pread_all(fd, reinterpret_cast<uint8_t*>(&h), sizeof h, 0) &&
            std::memcmp(h.magic, kMagic, 8) == 0 && h.version == kVersion &&
            h.header_bytes == kHeaderBytes && h.bytes == bytes;
  if (ok) {
    char fp[32], lay[32];
    fill(fp, fingerprint);
    fill(lay, layout);
    ok = std::memcmp(fp, h.fingerprint, 32) == 0 && std::memcmp(lay, h.layout, 32) == 0;
  }
  if (ok) {
    // In 64 MiB pieces over the pool: the page cache copies at memory speed on every core.
    constexpr int64_t kChunk = int64_t{64} << 20;
    std::atomic<bool> read_ok{true};
    pool.parallel_for((bytes + kChunk - 1) / kChunk, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t n = std::min(kChunk, bytes - i * kChunk);
        if (!pread_all(fd, region + i * kChunk, n, kHeaderBytes + i * kChunk)) read_ok = false;
      }
    });
    ok = read_ok && checksum64(region, bytes, &pool) == h.checksum;
    if (!ok) {
      log_warn(
          "x16 cache {} is damaged (a read failed or its checksum differs): removed; the layout is "
          "rebuilt",
          path);
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  }
  ::close(fd);
  if (ok) {  // used now: the eviction removes the least recently used files first
    std::error_code te;
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), te);
  }
  return ok;
}

bool x16_cache_write(const std::string& path, const std::string& fingerprint,
                     const std::string& layout, const uint8_t* region, int64_t bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::vector<uint8_t> head(kHeaderBytes, 0);
  Header h{};
  std::memcpy(h.magic, kMagic, 8);
  h.version = kVersion;
  h.header_bytes = kHeaderBytes;
  fill(h.fingerprint, fingerprint);
  fill(h.layout, layout);
  h.bytes = bytes;
  h.checksum = checksum64(region, bytes);
  std::memcpy(head.data(), &h, sizeof h);
  if (!write_file_atomically(path, head.data(), kHeaderBytes, region, bytes)) {
    log_warn("x16 cache: writing {} failed: {}; the next start interleaves again", path,
             std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace ponder
