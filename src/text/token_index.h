// TokenIndex: vocabulary string -> token id, an open-addressing hash table over the strings the
// tokenizer already holds (8 bytes a slot, no nodes), so loading 152k tokens and looking up 450k
// merge halves stays in the tens of milliseconds. Depends on nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ponder::text {

class TokenIndex {
 public:
  // The strings of texts must outlive the index and not change (moving the vector is fine: the
  // index keeps a pointer to its elements). The first id of a duplicate string wins.
  void build(const std::vector<std::string>& texts) {
    texts_ = texts.data();
    size_t cap = 16;
    while (cap < texts.size() * 2) cap *= 2;
    slots_.assign(cap, Slot{0, -1});
    mask_ = cap - 1;
    for (size_t id = 0; id < texts.size(); ++id) {
      const uint64_t h = hash(texts[id]);
      size_t i = h & mask_;
      bool dup = false;
      for (; slots_[i].id >= 0; i = (i + 1) & mask_) {
        if (slots_[i].tag == tag_of(h) && texts[slots_[i].id] == texts[id]) {
          dup = true;
          break;
        }
      }
      if (!dup) slots_[i] = Slot{tag_of(h), static_cast<int32_t>(id)};
    }
  }

  // The id of text, or -1.
  int32_t find(std::string_view text) const {
    if (slots_.empty()) return -1;
    const uint64_t h = hash(text);
    for (size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.id < 0) return -1;
      if (s.tag == tag_of(h) && texts_[s.id] == text) return s.id;
    }
  }

 private:
  struct Slot {
    uint32_t tag;  // high hash bits, to skip most string compares
    int32_t id;    // -1: empty
  };
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>{}(s); }
  static uint32_t tag_of(uint64_t h) { return static_cast<uint32_t>(h >> 32); }

  const std::string* texts_ = nullptr;  // the elements of the vector given to build()
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace ponder::text
