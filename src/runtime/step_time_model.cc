#include "runtime/step_time_model.h"

#include <algorithm>

namespace ponder {

void StepTimeModel::observe(int32_t n_decode, int32_t n_prompt, double seconds, int32_t n_guess) {
  if (n_prompt == 0 && n_guess > 0) {
    if (n_decode <= 0 || decode_s_ < 0) return;  // no decode step to weigh the guesses against
    ++guess_steps_since_plain_;
    // (Not judged against a prompt row's cost: a few rows beside the decode rows cost less.)
    if (seconds < kStaleShare * decode_s_) {
      // The fixed part is stale (the first steps after a load are slow): only a plain step can
      // measure it again, since the guesses' part cannot be told from it in this step.
      fixed_stale_ = true;
      return;
    }
    // Nearer than that, a guess step below the decode time is the host's noise, not staleness:
    // on a big model a guess row adds ~5% to a step whose time drifts by 10-20% (the 14B on a
    // shared Zen 5), and a plain step forced at each such step cut the drafts by half. The
    // average takes it, at 0.
    const double per_guess = std::max(seconds - decode_s_, 0.0) / n_guess;
    guess_row_s_ = guess_row_s_ < 0 ? per_guess : 0.8 * guess_row_s_ + 0.2 * per_guess;
    return;
  }
  n_prompt += n_guess;
  if (n_decode + n_prompt <= 0) return;
  if (n_prompt == 0) {
    // After a stale mark this step is the fresh measure the guess steps wait for: taken whole.
    decode_s_ = decode_s_ < 0 || fixed_stale_ ? seconds : 0.8 * decode_s_ + 0.2 * seconds;
    guess_steps_since_plain_ = 0;
    fixed_stale_ = false;
    return;
  }
  last_chunk_beside_ = n_decode > 0 ? n_prompt : 0;
  // The prompt rows' part of the step; alone, the weights' streaming is shared among them (a
  // slight overestimate of a row beside streams, on the safe side).
  const double fixed = n_decode > 0 && decode_s_ > 0 ? decode_s_ : 0.0;
  const double per_row = std::max(seconds - fixed, 0.0) / n_prompt;
  if (row_s_ >= 0 && n_decode > 0 && per_row < 0.5 * row_s_) {
    // Far faster than the model says: its fixed part is stale (the first decode steps after a load
    // are slow, 163 ms against 43 ms later on Zen 4), not the row cost. Without a decode-only step
    // to measure it while a long prompt runs, it is what this step leaves for it.
    decode_s_ = std::max(seconds - row_s_ * n_prompt, 0.0);
    return;
  }
  // An average over recent steps weighted by their rows: a step of 384 rows outweighs a one-row
  // prompt's (whose time is mostly the weights' streaming), and older steps fade.
  const double kept = kRowMemory * row_weight_;
  row_s_ = (kept * std::max(row_s_, 0.0) + n_prompt * per_row) / (kept + n_prompt);
  row_weight_ = kept + n_prompt;
}

int32_t StepTimeModel::prompt_rows(int32_t n_decoding, double max_step_s, int32_t max_rows) const {
  max_rows = std::max(max_rows, 1);
  if (n_decoding == 0) return max_rows;
  if (row_s_ <= 0) return std::min(kProbeRows, max_rows);
  const double room = kPlannedShare * max_step_s - std::max(decode_s_, 0.0);
  double rows = room / row_s_;
  if (last_chunk_beside_ > 0) rows = std::min(rows, 2.0 * last_chunk_beside_);
  return static_cast<int32_t>(std::clamp(rows, 1.0, static_cast<double>(max_rows)));
}

}  // namespace ponder
