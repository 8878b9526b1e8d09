// DraftSource: where speculative decoding's guesses come from. Each step the engine asks it, for
// every decoding sequence that drafts, for up to max_draft tokens that might follow the
// sequence's tokens; the engine then verifies them as extra rows of that sequence in the same
// forward pass as every other row and keeps the longest run the target itself samples (so the
// output is bitwise that of plain decoding: the draft only decides how many of the target's own
// tokens one step yields).
// Sources: prompt lookup (runtime/ngram_draft.h: text copied from earlier in the context), a
// smaller model with the same tokenizer (runtime/draft_model.h), and the benchmark's replay of a
// recorded continuation (runtime/replay_draft.h).
// Depends on base/thread_pool.h.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/thread_pool.h"

namespace ponder {

struct DraftAsk {
  uint64_t seq = 0;                 // the engine's sequence id (stable while it lives)
  std::span<const int32_t> tokens;  // the sequence's tokens: prompt, then every verified output
  int32_t max_draft = 0;            // at most this many tokens (>= 1)
  std::vector<int32_t>* draft = nullptr;  // filled with the guesses (empty: no guess this step)
};

class DraftSource {
 public:
  virtual ~DraftSource() = default;
  virtual const char* name() const = 0;
  // Fills each ask's draft. Called on the engine thread, between two forward passes of the
  // target, with the engine's thread pool (a draft model runs its own passes on it). Tokens of a
  // sequence may have changed since the last call beyond what was proposed (rejected guesses are
  // gone, a context shift moved them): a source that keeps state per sequence compares.
  virtual void propose(std::span<DraftAsk> asks, ThreadPool& pool) = 0;
  // The engine keeps a step beside decoding streams under this many seconds (its max_step_s): a
  // source that computes (a draft model catching up on a new prompt) spends a share of it a call.
  virtual void set_step_limit(double seconds) { (void)seconds; }
  // The sequence ended (finished, cancelled, preempted): drop what is kept for it.
  virtual void forget(uint64_t seq) { (void)seq; }
  // Seconds to draft one token for one sequence, as measured (0: free, as prompt lookup nearly
  // is, or not measured yet). The engine's adaptive draft length weighs it against its step.
  virtual double seconds_per_token() const { return 0; }
};

}  // namespace ponder
