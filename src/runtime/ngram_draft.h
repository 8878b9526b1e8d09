// NgramDraft: prompt lookup (`--spec ngram`): guesses copied from earlier in the sequence's own
// context, no second model. The last n tokens (n from max_ngram down to min_ngram) are looked for
// earlier in the tokens, the most recent occurrence first, and the tokens that followed it are
// the guess. R1 repeats the question, its own numbers and whole phrases while it thinks, and
// code edits repeat the code they change; where nothing repeats there is no guess and no cost
// beyond the search (a scan of the context: microseconds against a decode step of milliseconds).
// Depends on runtime/draft_source.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "runtime/draft_source.h"

namespace ponder {

// The guess for one sequence: up to max_draft tokens after the latest earlier occurrence of its
// last n tokens (the longest n in [min_ngram, max_ngram] that occurs). Empty when none occurs.
void ngram_guess(std::span<const int32_t> tokens, int32_t min_ngram, int32_t max_ngram,
                 int32_t max_draft, std::vector<int32_t>* out);

class NgramDraft : public DraftSource {
 public:
  NgramDraft(int32_t min_ngram = 2, int32_t max_ngram = 4)
      : min_ngram_(min_ngram), max_ngram_(max_ngram) {}
  const char* name() const override { return "ngram"; }
  void propose(std::span<DraftAsk> asks, ThreadPool& pool) override;

 private:
  int32_t min_ngram_, max_ngram_;
};

}  // namespace ponder
