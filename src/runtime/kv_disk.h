// KvDisk: the prefix cache on disk (--kv-disk DIR), a BlockTier under the RAM pool (kv_pool.h).
// The full K/V blocks of every sequence that leaves the engine are written to files, keyed by the
// pool's chain hashes (every token from the start of the sequence) and the tokens themselves, in
// a directory per numerics key (the model file's fingerprint, the attention order, the KV types,
// the ISA's kernel order: everything that decides the bits of a K/V row for given tokens), so a
// new request whose prefix is on disk, after a restart or an eviction from RAM, reads those blocks
// back instead of computing them, bitwise what computing would give.
//
// Files: one per write (the new full blocks of one sequence), "<hash>-<pid>-<n>.kvb": a header
// (magic, version, key hash, geometry, the blocks' chain hashes, tokens and checksums, its own
// checksum) padded to 4 KiB, then each block's K and V rows, layer by layer and head by head.
// Crash-safe like the response cache: copied and written by a writer thread (the pool keeps the
// blocks referenced until copied), to a temporary name renamed when complete; a temporary left by a
// dead process, a torn or foreign file, or a block whose checksum differs is removed when found and
// its blocks computed, never used. A full disk or a read-only directory costs a log line, never a
// request. Bounded: before a write, the least recently used files of the whole directory (every
// key's; a read refreshes a file's time) are removed until the new one fits max_bytes.
// docs/kv-disk.md has the design and the measurements.
// Depends on model/kv_cache.h, runtime/kv_pool.h, runtime/engine_metrics.h, base.
#pragma once

#include <array>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/huge_pages.h"
#include "model/kv_cache.h"
#include "runtime/engine_metrics.h"
#include "runtime/kv_pool.h"

namespace ponder {

struct KvDiskOptions {
  std::string dir;                       // "" = off
  int64_t max_bytes = int64_t{4} << 30;  // every file in dir together (--kv-disk-size)
  // Copies waiting for the writer; the blocks of a write past it are dropped (a later write of
  // the same prefix, at the next turn, takes them).
  int64_t max_queued_bytes = int64_t{256} << 20;
};

class KvDisk final : public BlockTier {
 public:
  // key: what decides the bits of the cache's rows (see above); its hash names the subdirectory.
  // Reads the headers of the files already there (a restart) and removes damaged ones.
  KvDisk(KvDiskOptions opts, const std::string& key, KvCache& cache);
  ~KvDisk() override;  // finishes the queued writes
  KvDisk(const KvDisk&) = delete;
  KvDisk& operator=(const KvDisk&) = delete;

  bool contains(uint64_t hash, std::span<const int32_t> tokens) override;
  bool read(uint64_t hash, std::span<const int32_t> tokens, int32_t block) override;
  std::vector<int32_t> write(std::span<const TierBlock> blocks) override;
  std::vector<int32_t> copied() override;
  void wait_copied() override;

  // Called by the writer thread after each copy (so the engine may take the blocks back while
  // idle); nullptr: none. When this returns, no earlier callback is running.
  void set_on_copied(std::function<void()> f);
  void flush();  // waits until every queued write is on disk (or failed)
  KvDiskStats stats() const;
  const std::string& dir() const { return dir_; }  // this key's subdirectory
  int64_t block_bytes() const { return block_bytes_; }

 private:
  struct Slot {
    int32_t file = 0;  // files_ id
    int32_t index = 0;
    uint64_t checksum = 0;
    std::array<int32_t, kKvBlockSize> tokens{};
  };
  struct FileInfo {
    std::string name;
    std::vector<uint64_t> hashes;  // the blocks the index has from it
    int64_t bytes = 0;
    int64_t header_bytes = 0;  // where its first block starts
  };
  struct Job {
    std::vector<uint8_t> head;  // header and entries, padded
    HugePages data;             // the blocks' rows (not zeroed first: all are copied)
    int64_t capacity = 0;       // of data
    int64_t bytes = 0;
    std::vector<int32_t> blocks;  // the pool blocks to copy, held by the pool until copied
    std::vector<uint64_t> hashes;
    std::vector<Slot> slots;  // file unset
  };

  void scan();  // at start: index the complete files, remove damaged ones and dead temporaries
  bool index_file(const std::string& name);
  void drop_file_locked(int32_t file);  // forgets a file and its blocks (mu_ held)
  void writer_loop();
  void make_room(int64_t need);  // removes least recently used files of the whole directory
  // Writer thread: the job's blocks into its buffer (false: out of memory, the job dropped).
  bool copy_out(Job* job);
  void gather(int32_t block, uint8_t* dst) const;
  void scatter(const uint8_t* src, int32_t block);

  KvDiskOptions opts_;
  std::string dir_;
  uint64_t key_hash_ = 0;
  KvCache& cache_;
  int64_t block_bytes_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the writer
  std::condition_variable idle_cv_;  // wakes flush()
  std::unordered_map<uint64_t, Slot> index_;
  std::unordered_map<int32_t, FileInfo> files_;
  std::unordered_set<uint64_t> pending_;  // hashes queued for writing
  std::deque<Job> queue_;
  int64_t queued_bytes_ = 0;
  std::vector<int32_t> copied_;  // blocks copied out, for copied()
  std::mutex on_copied_mu_;      // held while on_copied_ runs or changes (before mu_, never in it)
  std::function<void()> on_copied_;
  bool writing_ = false;
  bool copying_ = false;  // the writer is copying the job it took
  bool stop_ = false;
  bool write_failing_ = false;  // the last write failed (logged once until one succeeds)
  int32_t next_file_ = 1;
  uint64_t next_name_ = 0;
  KvDiskStats stats_;

  // Engine thread only: the file read last (kept open), and a block's bytes.
  int32_t read_file_ = 0;
  int read_fd_ = -1;
  std::vector<uint8_t> scratch_;

  // Writer thread only: the largest copy buffer written so far, kept for the next copy that fits
  // it (a fresh buffer's first-touch page faults cost more than the copy: 70.5 ms for a
  // 4,000-token turn of the 1.5B, 114 MB; 592 ms on a VM whose faults are slow, hence huge pages).
  HugePages spare_;
  int64_t spare_capacity_ = 0;

  std::thread writer_;
};

}  // namespace ponder
