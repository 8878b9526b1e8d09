// Byte-pair merging of one pre-tokenized piece: repeatedly merge the adjacent pair with the
// lowest merge rank (the leftmost one on ties) until no pair has a merge. Short pieces (almost all)
// use a linear scan over a linked list of symbols; long ones a heap with lazy deletion, so a
// 100 kB run of letters stays O(n log n). Depends on text/merge_table.h.
#pragma once

#include <cstdint>
#include <vector>

#include "text/merge_table.h"

namespace ponder::text {

struct BpeScratch {
  std::vector<int32_t> id, merged, rank, next, prev;
  struct HeapEntry {
    int32_t rank, pos, left, right;
  };
  std::vector<HeapEntry> heap;
};

enum class BpeMethod { kAuto, kScan, kHeap };

// symbols: in: the single-byte token ids of the piece; out: its token ids.
void bpe_merge(const MergeTable& merges, std::vector<int32_t>* symbols, BpeScratch* s,
               BpeMethod method = BpeMethod::kAuto);

}  // namespace ponder::text
