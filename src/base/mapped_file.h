// MappedFile: a read-only memory map of a whole file. Owns the mapping; move-only.
// Opening returns a Status naming the path and the OS error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace ponder {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  static Expected<MappedFile> open(const std::string& path);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Asks the kernel to read the whole file ahead (madvise WILLNEED), as the users' guides do with
  // `cat model > /dev/null`: the first pass over the weights then finds them in memory.
  void read_ahead() const;
  // Locks the mapping in RAM (mlock), so the weights are never paged out; an error names the
  // limit (RLIMIT_MEMLOCK) when the OS refuses.
  Status lock_in_memory() const;

 private:
  void reset();
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Drops the whole pages inside [p, p + n) of a read-only file mapping from this process's resident
// memory (madvise MADV_DONTNEED): the file stays in the page cache, and a later read maps it again.
void release_pages(const void* p, size_t n);

}  // namespace ponder
