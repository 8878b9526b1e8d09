// ReplayDraft: the benchmark's draft source (`ponder bench --spec-replay`). Real weights are not
// at hand and random models agree with nothing, so the machinery of speculative decoding is
// measured by replaying the target's own recorded greedy continuation as the guesses, each guess
// made wrong with probability 1 - acceptance (decided by its position, the same every time it is
// guessed). What it shows is the engine's side alone: verifying k guesses a step and rolling back
// the rejected ones, at a chosen acceptance.
// Depends on runtime/draft_source.h.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/draft_source.h"

namespace ponder {

class ReplayDraft : public DraftSource {
 public:
  // continuation: the target's greedy tokens after a prompt of n_prompt tokens.
  ReplayDraft(std::vector<int32_t> continuation, int32_t n_prompt, double acceptance,
              int32_t n_vocab, uint64_t seed = 1)
      : continuation_(std::move(continuation)),
        n_prompt_(n_prompt),
        acceptance_(acceptance),
        n_vocab_(n_vocab),
        seed_(seed) {}
  const char* name() const override { return "replay"; }
  void propose(std::span<DraftAsk> asks, ThreadPool& pool) override {
    (void)pool;
    for (DraftAsk& a : asks) {
      a.draft->clear();
      const int64_t at = static_cast<int64_t>(a.tokens.size()) - n_prompt_;
      for (int64_t i = at;
           i >= 0 && i < at + a.max_draft && i < static_cast<int64_t>(continuation_.size()); ++i) {
        const int32_t right = continuation_[static_cast<size_t>(i)];
        a.draft->push_back(right_at(i) ? right : (right + 1) % n_vocab_);
      }
    }
  }

  // The share of the first n positions guessed right: what the acceptance comes out as over a
  // continuation of n tokens (positions are drawn once, so a short one misses the asked share).
  double right_share(int64_t n) const {
    int64_t right = 0;
    for (int64_t i = 0; i < n; ++i) right += right_at(i) ? 1 : 0;
    return n > 0 ? static_cast<double>(right) / static_cast<double>(n) : 0;
  }

 private:
  bool right_at(int64_t i) const {  // a splitmix64 draw per position
    uint64_t z = seed_ + static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53 < acceptance_;
  }
  std::vector<int32_t> continuation_;
  int32_t n_prompt_;
  double acceptance_;
  int32_t n_vocab_;
  uint64_t seed_;
};

}  // namespace ponder
