// StepTimeModel: what a step of the forward pass costs on this machine, learned from the steps the
// engine runs, and the prompt chunk that keeps a step beside decoding streams under a time limit.
// A step costs a fixed part (the weights streamed once, the decode rows: measured on decode-only
// steps, and corrected by a step beside streams that leaves it less) plus a cost per prompt row
// (measured on steps with prompt rows). Both vary ~10x between CPUs and models, the row cost grows
// with the prompt's depth and the first steps after a load are slower than the rest, so neither
// is a constant: each follows recent steps. A chunk never grows more than twice over from
// one step beside streams to the next, and the first one beside streams is a small probe, so a
// stale or missing estimate cannot freeze the streams for long (issue 32: a fixed 16-row floor
// stalled them 1.1 s on a slow CPU). Pure logic, no clock: tests feed it simulated times. Depends
// on nothing.
#pragma once

#include <cstdint>

namespace ponder {

class StepTimeModel {
 public:
  // Rows of the first prompt chunk beside decoding streams while the row cost is unknown.
  static constexpr int32_t kProbeRows = 4;
  // The share of the step limit a planned step may take (the rest: sampling, the estimate's error).
  static constexpr double kPlannedShare = 0.85;

  // A step of n_decode decode rows, n_prompt prompt rows and n_guess guess rows (speculative
  // decoding's, verified beside their sequence's decode row) took `seconds`. Guess rows beside
  // prompt rows are weighed like them; a step of decode and guess rows only measures what a
  // guess row adds (a few rows beside the decode rows: not what a row of a prompt chunk costs).
  void observe(int32_t n_decode, int32_t n_prompt, double seconds, int32_t n_guess = 0);

  // Prompt rows for the next step: max_rows when no stream decodes (nobody waits); else as many
  // as keep the step (n_decoding decode rows and the chunk) under kPlannedShare * max_step_s by
  // the model, at least 1, at most max_rows and twice the previous chunk beside streams.
  int32_t prompt_rows(int32_t n_decoding, double max_step_s, int32_t max_rows) const;

  double decode_step_s() const { return decode_s_; }  // < 0: not measured yet
  double prompt_row_s() const { return row_s_; }      // < 0: not measured yet
  // What one guess row adds to a decode step (< 0: not measured yet).
  double guess_row_s() const { return guess_row_s_; }
  // True when the next decode step should run without guesses: the decode step's own time is
  // what a guess row's cost is measured against, and a sequence that always drafts would leave
  // it unmeasured (once every kPlainEvery guess steps, or at once when a guess step took clearly
  // less than it: kStaleShare).
  bool wants_plain_step() const {
    return decode_s_ >= 0 && (fixed_stale_ || guess_steps_since_plain_ >= kPlainEvery);
  }
  static constexpr int32_t kPlainEvery = 32;
  // A guess step under this share of the decode step's time marks that time stale.
  static constexpr double kStaleShare = 0.8;

 private:
  static constexpr double kRowMemory = 0.7;  // how much of the rows seen so far a step keeps
  double row_weight_ = 0;                    // rows behind row_s_, faded
  double decode_s_ = -1;
  double row_s_ = -1;
  double guess_row_s_ = -1;
  int32_t guess_steps_since_plain_ = 0;
  bool fixed_stale_ = false;       // a guess step took less than the decode step's measured time
  int32_t last_chunk_beside_ = 0;  // prompt rows of the last step that also had decode rows
};

}  // namespace ponder
