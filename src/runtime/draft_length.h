// DraftLength: how many guesses a sequence drafts in its next step (speculative decoding). A step
// that verifies k guesses yields 1 + a + a^2 + ... + a^k tokens on average, where a is the chance
// that a guess is right once the ones before it were, and costs one decode step plus k rows (and
// the drafting of k tokens): the length chosen maximizes tokens per unit of time for the measured
// a and costs, down to no drafting; a sequence that stopped drafting tries one guess now and
// then, so a source that starts to agree is noticed. Pure logic, no clock. Depends on nothing.
#pragma once

#include <cstdint>

namespace ponder {

class DraftLength {
 public:
  // A step without guesses, every this many, tries one.
  static constexpr int32_t kProbeEvery = 16;

  // The first `accepted` of `proposed` guesses were the target's own tokens.
  void observe(int32_t proposed, int32_t accepted) {
    for (int32_t i = 0; i < proposed; ++i) {
      const bool right = i < accepted;
      a_ += kWeight * ((right ? 1.0 : 0.0) - a_);
      if (!right) break;  // later guesses were not judged
    }
  }

  // extra_cost: one more row (and one drafted token) as a share of the step time that one
  // decoding sequence accounts for. Returns 0..max_draft.
  int32_t next(double extra_cost, int32_t max_draft) {
    int32_t best = 0;
    double best_rate = 1.0, expected = 1.0, a_pow = 1.0;
    for (int32_t k = 1; k <= max_draft; ++k) {
      a_pow *= a_;
      expected += a_pow;
      const double rate = expected / (1.0 + extra_cost * k);
      if (rate > best_rate) best = k, best_rate = rate;
    }
    if (best > 0 || max_draft <= 0) {
      idle_ = 0;
      return best;
    }
    if (++idle_ < kProbeEvery) return 0;
    idle_ = 0;
    return 1;
  }

  double acceptance() const { return a_; }

 private:
  static constexpr double kWeight = 0.1;  // how fast the estimate follows new verdicts
  double a_ = 0.6;                        // a guess is right (given the ones before it were)
  int32_t idle_ = 0;                      // steps since the last guess
};

}  // namespace ponder
