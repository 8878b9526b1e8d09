// MergeTable: the BPE merges as a hash table from a pair of token ids to (rank, merged id).
// Open addressing with linear probing over a power-of-two table; the lookup is the inner loop of
// encoding, so it is a few instructions and one or two cache lines. Depends on nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ponder::text {

class MergeTable {
 public:
  struct Merge {
    int32_t rank;    // lower merges first
    int32_t merged;  // the id of left+right
  };
  static constexpr int32_t kNoRank = INT32_MAX;

  void reserve(size_t n_merges);
  // Keeps the first (lowest-rank) entry for a pair added twice.
  void insert(int32_t left, int32_t right, Merge m);

  Merge find(int32_t left, int32_t right) const {
    if (slots_.empty()) return {kNoRank, -1};
    const uint64_t key = pack(left, right);
    for (size_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return s.merge;
      if (s.key == kEmpty) return {kNoRank, -1};
    }
  }
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static size_t hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  void grow();

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace ponder::text
