#include "text/bpe.h"

#include <algorithm>

namespace ponder::text {

namespace {

constexpr size_t kHeapThreshold = 128;  // pieces longer than this use the heap

void merge_scan(const MergeTable& merges, std::vector<int32_t>* symbols, BpeScratch* s) {
  const int32_t n = static_cast<int32_t>(symbols->size());
  int32_t* id = symbols->data();
  s->rank.resize(n);
  s->merged.resize(n);
  s->next.resize(n);
  s->prev.resize(n);
  int32_t* rank = s->rank.data();      // [n] rank of the pair (k, next[k])
  int32_t* merged = s->merged.data();  // [n] the id that pair merges into
  int32_t* next = s->next.data();      // [n] next live symbol, n at the end
  int32_t* prev = s->prev.data();      // [n] previous live symbol, -1 at the start
  for (int32_t k = 0; k < n; ++k) {
    next[k] = k + 1;
    prev[k] = k - 1;
    if (k + 1 < n) {
      const MergeTable::Merge m = merges.find(id[k], id[k + 1]);
      rank[k] = m.rank;
      merged[k] = m.merged;
    } else {
      rank[k] = MergeTable::kNoRank;
    }
  }
  for (;;) {
    int32_t best = MergeTable::kNoRank;
    int32_t bk = -1;
    for (int32_t k = 0; k < n; k = next[k]) {
      if (rank[k] < best) {
        best = rank[k];
        bk = k;
      }
    }
    if (bk < 0) break;
    const int32_t j = next[bk];
    id[bk] = merged[bk];
    next[bk] = next[j];
    if (next[j] < n) prev[next[j]] = bk;
    if (next[bk] < n) {
      const MergeTable::Merge m = merges.find(id[bk], id[next[bk]]);
      rank[bk] = m.rank;
      merged[bk] = m.merged;
    } else {
      rank[bk] = MergeTable::kNoRank;
    }
    if (prev[bk] >= 0) {
      const int32_t p = prev[bk];
      const MergeTable::Merge m = merges.find(id[p], id[bk]);
      rank[p] = m.rank;
      merged[p] = m.merged;
    }
  }
  int32_t out = 0;
  for (int32_t k = 0; k < n; k = next[k]) id[out++] = id[k];
  symbols->resize(out);
}

void merge_heap(const MergeTable& merges, std::vector<int32_t>* symbols, BpeScratch* s) {
  using Entry = BpeScratch::HeapEntry;
  const int32_t n = static_cast<int32_t>(symbols->size());
  int32_t* id = symbols->data();
  s->next.resize(n);
  s->prev.resize(n);
  int32_t* next = s->next.data();  // [n] next live symbol, n at the end; -2 once merged away
  int32_t* prev = s->prev.data();  // [n] previous live symbol, -1 at the start
  auto& heap = s->heap;
  heap.clear();
  // std::push_heap builds a max-heap: "less" means higher rank, or same rank and further right.
  auto later = [](const Entry& a, const Entry& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
  };
  auto push = [&](int32_t k) {
    if (k < 0 || next[k] >= n) return;
    const MergeTable::Merge m = merges.find(id[k], id[next[k]]);
    if (m.rank == MergeTable::kNoRank) return;
    heap.push_back({m.rank, k, id[k], id[next[k]]});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int32_t k = 0; k < n; ++k) {
    next[k] = k + 1;
    prev[k] = k - 1;
  }
  for (int32_t k = 0; k + 1 < n; ++k) push(k);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Entry e = heap.back();
    heap.pop_back();
    const int32_t k = e.pos;
    // Stale entries: the left symbol was merged away, or either side changed since the push.
    if (next[k] < 0 || next[k] >= n || id[k] != e.left || id[next[k]] != e.right) continue;
    const int32_t j = next[k];
    id[k] = merges.find(e.left, e.right).merged;
    next[k] = next[j];
    if (next[j] < n) prev[next[j]] = k;
    next[j] = -2;
    push(prev[k]);
    push(k);
  }
  int32_t out = 0;
  for (int32_t k = 0; k < n; k = next[k]) id[out++] = id[k];
  symbols->resize(out);
}

}  // namespace

void bpe_merge(const MergeTable& merges, std::vector<int32_t>* symbols, BpeScratch* s,
               BpeMethod method) {
  if (symbols->size() < 2) return;
  if (method == BpeMethod::kHeap ||
      (method == BpeMethod::kAuto && symbols->size() > kHeapThreshold)) {
    merge_heap(merges, symbols, s);
  } else {
    merge_scan(merges, symbols, s);
  }
}

}  // namespace ponder::text
