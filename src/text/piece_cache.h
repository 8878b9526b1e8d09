// PieceCache: memoises the BPE result of each distinct piece within one encode call. Prose
// repeats its words, so a long prompt runs BPE once per distinct word. Keys are views into the
// text being encoded, so the cache is emptied (in O(1), by a generation stamp) at every call.
// Bounded: when full it stops remembering. Depends on nothing.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace ponder::text {

class PieceCache {
 public:
  // Forgets everything (the keys of the last call point into a text that may be gone).
  void clear() {
    if (++stamp_ == 0) {  // after 2^32 calls: empty slots carry stamp 0, so start over
      slots_.assign(slots_.size(), Slot{});
      stamp_ = 1;
    }
    size_ = 0;
    ids_.clear();
  }

  // The ids of piece, or false.
  bool find(std::string_view piece, uint64_t hash, const int32_t** ids, size_t* n) const {
    if (slots_.empty()) return false;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.stamp != stamp_) return false;
      if (s.hash == hash && std::string_view(s.key, s.key_len) == piece) {
        *ids = ids_.data() + s.offset;
        *n = s.count;
        return true;
      }
    }
  }

  void insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t n) {
    if (slots_.empty()) {
      slots_.resize(kInitialSlots);
      mask_ = kInitialSlots - 1;
    }
    if ((size_ + 1) * 2 > slots_.size()) {
      if (slots_.size() >= kMaxSlots) return;
      rehash(slots_.size() * 2);
    }
    put({piece.data(), static_cast<uint32_t>(piece.size()), stamp_,
         static_cast<uint32_t>(ids_.size()), static_cast<uint32_t>(n), hash});
    ids_.insert(ids_.end(), ids, ids + n);
  }

  static uint64_t hash_of(std::string_view s) {
    uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, then a final mix for the low bits
    for (char c : s) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
    return h ^ (h >> 29);
  }

 private:
  struct Slot {
    const char* key = nullptr;
    uint32_t key_len = 0;
    uint32_t stamp = 0;  // valid only when equal to stamp_
    uint32_t offset = 0;
    uint32_t count = 0;
    uint64_t hash = 0;
  };
  static constexpr size_t kInitialSlots = 1024;
  static constexpr size_t kMaxSlots = 1 << 18;

  void put(const Slot& slot) {
    for (size_t i = slot.hash & mask_;; i = (i + 1) & mask_) {
      if (slots_[i].stamp != stamp_) {
        slots_[i] = slot;
        ++size_;
        return;
      }
    }
  }
  void rehash(size_t cap) {
    std::vector<Slot> old(cap);
    old.swap(slots_);
    mask_ = cap - 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.stamp == stamp_) put(s);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
  uint32_t stamp_ = 1;
  std::vector<int32_t> ids_;
};

}  // namespace ponder::text
