// The x16 layout cache: the load-time x16 copies (kernels/interleave.h) of a model file, written
// once to a file and read back at the next start instead of interleaving again (1.4 s -> a read of
// the page cache for the 1.5B Q4_K_M). A cache file is named by the model file's identity
// (gguf/model_fingerprint.h) and the layout (each copied matrix's type, shape and offset, and the
// format version), and is trusted only whole: its size, header and a checksum over every byte
// must match, else it is removed and rebuilt. Written in the background after a cold start (to a
// temporary name, renamed when complete), so the cold start is no slower; a full disk or a
// read-only directory costs a log line, never the load. The directory is bounded: before a write,
// the least recently used cache files (a read refreshes a file's time) are removed until the new
// one fits under max_bytes, and a write that would leave the disk with less than its reserve free
// is skipped, so trying many models never fills a disk with second copies.
// Depends on base, gguf.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/thread_pool.h"

namespace ponder {

struct X16CacheOptions {
  std::string dir;                        // "" = no cache
  int64_t min_bytes = int64_t{16} << 20;  // smaller copies are faster to redo than to read
  int64_t max_bytes = int64_t{32} << 30;  // all cache files together (--x16-cache-size)
  // A write is skipped when it would leave less than this share of the disk free.
  double min_free_share = 0.10;
};

// The word that turns the cache off, for --x16-cache and PONDER_X16_CACHE alike.
inline constexpr std::string_view kX16CacheOff = "off";

// PONDER_X16_CACHE: kX16CacheOff or "0" turns the cache off, another value is its directory;
// else $XDG_CACHE_HOME/ponder/x16, else ~/.cache/ponder/x16. PONDER_X16_CACHE_GIB: the bound.
X16CacheOptions x16_cache_default();

// What a cache directory holds: its complete cache files and their bytes.
struct X16CacheUsage {
  int64_t files = 0;
  int64_t bytes = 0;
  int64_t model_files = 0;  // of those, the files of one model (fingerprint given)
  int64_t model_bytes = 0;
};
X16CacheUsage x16_cache_usage(const std::string& dir, const std::string& fingerprint = "");

// Makes room for a file of `bytes` at `path`: removes the least recently used other cache files
// until the directory fits opts.max_bytes with it. False (nothing written then) when the file
// alone is larger than the bound or the disk would keep less than opts.min_free_share free.
bool x16_cache_make_room(const X16CacheOptions& opts, const std::string& path, int64_t bytes);

// The cache file for this model identity and layout in opts.dir.
std::string x16_cache_path(const X16CacheOptions& opts, const std::string& fingerprint,
                           const std::string& layout);

// Reads a complete, matching cache file into region[0, bytes). False (and the file removed when
// it is damaged) otherwise.
bool x16_cache_read(const std::string& path, const std::string& fingerprint,
                    const std::string& layout, uint8_t* region, int64_t bytes, ThreadPool& pool);

// Writes region[0, bytes) to path (temporary file + rename). Logs and returns false on failure.
bool x16_cache_write(const std::string& path, const std::string& fingerprint,
                     const std::string& layout, const uint8_t* region, int64_t bytes);

}  // namespace ponder
