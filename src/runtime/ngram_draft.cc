#include "runtime/ngram_draft.h"

#include <algorithm>

namespace ponder {

void ngram_guess(std::span<const int32_t> tokens, int32_t min_ngram, int32_t max_ngram,
                 int32_t max_draft, std::vector<int32_t>* out) {
  out->clear();
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  for (int64_t n = std::min<int64_t>(max_ngram, n_tokens - 1); n >= std::max(min_ngram, 1); --n) {
    const int32_t* tail = tokens.data() + (n_tokens - n);
    // Occurrences ending before the tail's own start, the most recent first.
    for (int64_t start = n_tokens - n - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + n, tokens.data() + start)) continue;
      const int64_t from = start + n;
      const int64_t count = std::min<int64_t>(max_draft, n_tokens - from);
      out->assign(tokens.begin() + from, tokens.begin() + from + count);
      return;
    }
  }
}

void NgramDraft::propose(std::span<DraftAsk> asks, ThreadPool& pool) {
  (void)pool;
  for (DraftAsk& a : asks) ngram_guess(a.tokens, min_ngram_, max_ngram_, a.max_draft, a.draft);
}

}  // namespace ponder
