// Whole reads and writes of files, and the checksum that the on-disk caches (the x16 layout cache,
// the K/V blocks on disk) keep beside what they store, to find a torn or altered file.
// Depends on base/thread_pool.h.
#pragma once

#include <cstdint>
#include <string>

#include "base/thread_pool.h"

namespace ponder {

// pread until n bytes are read from offset; false on an error or an early end of file.
bool pread_all(int fd, uint8_t* dst, int64_t n, int64_t offset);
// write until n bytes are written; false on an error (errno says which).
bool write_all(int fd, const uint8_t* src, int64_t n);

// 64-bit words in four lanes per 1 MiB piece, pieces combined in order, so any thread count (pool
// may be null) gives the same value; every bit of the input reaches it. Not a cryptographic hash.
uint64_t checksum64(const uint8_t* p, int64_t n, ThreadPool* pool = nullptr);

// Writes bytes to path through a temporary file in the same directory (fsync, then rename), so a
// crash leaves the old file or the new one, never a part. False (errno set, nothing left behind)
// on failure.
bool write_file_atomically(const std::string& path, const uint8_t* head, int64_t head_bytes,
                           const uint8_t* body, int64_t body_bytes);

}  // namespace ponder
