// Scheduler: continuous batching as pure logic. It owns the sequences (waiting and running) and
// the KvPool, and each step says which rows the forward pass runs: there are no prefill and
// decode phases, only a token budget per step (vLLM v1's design). Every running sequence that is
// decoding gets its one row first, then prompts get chunks (chunked prefill) up to the prefill
// budget the engine sets from its measured step time, so a long prompt never freezes streams
// already running. Waiting sequences are admitted first come, first served, each taking the
// longest cached prefix of its tokens. When the pool runs out, the newest running sequence is
// preempted: its blocks are released (they stay cached, so the recompute is often short) and it
// waits at the front of the queue, keeping its tokens, to be recomputed; batch-invariant kernels
// make the recomputed sequence continue bitwise as before.
// No model, no threads, no time: tests drive it in a simulated mode (scheduler_test.cc).
// Depends on runtime/kv_pool.h.
#pragma once

#include <climits>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <vector>

#include "runtime/kv_pool.h"

namespace ponder {

struct SchedulerConfig {
  int32_t max_running = 16;  // sequences decoding or prefilling at once
  int32_t max_batch = 512;   // rows per step (--batch-size)
};

struct Sequence {
  uint64_t id = 0;              // unique; also the arrival order
  uint64_t request = 0;         // the request it belongs to (the choices of one request share it)
  uint64_t leader = 0;          // non-zero: another choice of the same prompt; waits for its prompt
  std::vector<int32_t> tokens;  // the prompt, then the generated tokens
  int32_t n_prompt = 0;
  int32_t n_computed = 0;  // positions whose K/V are in `blocks`
  int32_t n_cached = -1;   // prompt tokens taken from the cache at first admission (-1: not yet)
  int32_t n_preempted = 0;
  bool wants_logits = true;  // false: prefill only (warming the cache); done once computed
  bool running = false;
  int32_t findable_end = INT32_MAX;  // positions past a context shift's kept start: never cached
  std::vector<int32_t> blocks;       // the block table
  // While it waits: the blocks of its prefix read from the block tier so far (the reads spread
  // over steps), held so that nothing evicts them before it is admitted.
  std::vector<int32_t> tier_blocks;
  // Speculative decoding: guesses of the tokens after `tokens`, run as extra rows of its next
  // decode step and verified by the engine (runtime/draft_source.h). Empty: no guess.
  std::vector<int32_t> draft;

  int32_t pending() const { return static_cast<int32_t>(tokens.size()) - n_computed; }
  bool decoding() const { return n_computed >= n_prompt && pending() == 1; }
};

struct StepChunk {
  Sequence* seq;
  int32_t begin;  // positions [begin, end) of seq->tokens run this step
  int32_t end;
  bool logits;  // the last row's logits are wanted (the sequence samples its next token)
  // Rows [end - n_draft, end) are the sequence's draft (guesses after its tokens): every row of
  // the chunk gives logits, and complete() leaves the guessed positions to the engine, which
  // keeps (commit_guess) those the target itself samples.
  int32_t n_draft = 0;
  // The token of position p of this chunk (a guess past the sequence's tokens).
  int32_t token(int32_t p) const {
    const int32_t n = static_cast<int32_t>(seq->tokens.size());
    return p < n ? seq->tokens[static_cast<size_t>(p)] : seq->draft[static_cast<size_t>(p - n)];
  }
};

struct StepPlan {
  std::vector<StepChunk> chunks;    // decode rows first, then prompt chunks
  std::vector<BlockCopy> copies;    // do these on the K/V data before the forward pass
  std::vector<uint64_t> preempted;  // sequences sent back to the queue this step
  int32_t n_rows = 0;
  int32_t n_decode = 0;  // decoding sequences (one row each, plus their drafts' rows)
  int32_t n_draft = 0;   // draft rows
  bool empty() const { return chunks.empty(); }
};

// What the engine must do to the K/V data after a context shift, before the next step.
struct ContextShift {
  std::vector<BlockCopy> copies;  // first: shared blocks copied into private ones
  std::vector<int32_t> blocks;    // then: re-rotate the keys of these blocks by `delta` positions
  std::vector<int32_t> n_slots;   // (how many slots of each hold K/V)
  int32_t delta = 0;              // minus the positions dropped
  int32_t n_kept = 0, n_dropped = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, int32_t n_blocks);

  const SchedulerConfig& config() const { return config_; }
  KvPool& pool() { return pool_; }
  // A second tier of blocks under the pool (the disk; null: none): admission extends a prefix
  // with its blocks, and the full blocks of a removed sequence are handed to it.
  void set_block_tier(BlockTier* tier) { tier_ = tier; }
  // Takes back the blocks the tier has copied since (schedule() does it first thing).
  void take_back_tier_blocks() {
    if (tier_ != nullptr) pool_.take_back(*tier_, /*wait=*/false);
  }
  const KvPool& pool() const { return pool_; }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  bool idle() const { return waiting_.empty() && running_.empty(); }
  int32_t n_decoding() const;  // running sequences past their prompt

  // Queues a sequence (tokens and n_prompt set, at least one token). Its id must be larger than
  // every id added before.
  Sequence* add(std::unique_ptr<Sequence> seq);
  Sequence* find(uint64_t id);

  // The rows of the next step: at most config.max_batch, of which at most prefill_budget are
  // prompt rows (decode rows always run). May preempt; never leaves a sequence without the blocks
  // its rows need. Admission reads at most tier_reads blocks from the block tier: a sequence
  // whose prefix the tier holds waits (later ones may pass it) until all of it is read, so that
  // the reads of a long prefix spread over steps instead of stalling running streams.
  StepPlan schedule(int32_t prefill_budget, int32_t tier_reads = INT32_MAX);

  // The step ran: records the computed positions in the pool. Returns the prefill-only sequences
  // that are now complete (removed; their blocks released and cached).
  std::vector<uint64_t> complete(const StepPlan& plan);

  // Speculative decoding, after complete(): the guess at position s->n_computed was the token the
  // target sampled there (now s->tokens[n_computed]), so its K/V, computed by the step, stand.
  void commit_guess(Sequence* s);
  // The draft of s is settled: forgets it and gives back the blocks only its rejected guesses used.
  void end_draft(Sequence* s);
  // Running sequences that decode (for drafting), oldest first.
  std::vector<Sequence*> decoding_sequences();

  // Removes a sequence (done, or cancelled), wherever it is; its blocks are released (and their
  // full blocks handed to the tier). False when there is no such sequence.
  bool remove(uint64_t id);
  // llama.cpp's context shift for a decoding sequence: keeps its first n_keep positions (rounded
  // up to whole blocks), drops half of the rest (whole blocks, at least one) and moves what
  // follows back to close the gap. The moved positions never enter the prefix cache (their keys
  // are re-rotated, not what a fresh prefill would compute). False when nothing can be dropped or
  // no block is free for a copy.
  bool shift_context(Sequence* s, int32_t n_keep, ContextShift* out);
  // The ids of every sequence of `request`.
  std::vector<uint64_t> sequences_of(uint64_t request) const;

 private:
  bool admissible(const Sequence& s) const;
  void preempt(Sequence* s, StepPlan* plan);
  Sequence* newest_running();
  // Grows s's table for `n` more rows, preempting newer sequences when allowed; false if the
  // rows cannot be had (s itself may have been preempted: check s->running).
  bool grow(Sequence* s, int32_t n, bool may_preempt, StepPlan* plan);

  SchedulerConfig config_;
  KvPool pool_;
  BlockTier* tier_ = nullptr;
  std::deque<std::unique_ptr<Sequence>> waiting_;   // by id (arrival), preempted ones included
  std::vector<std::unique_ptr<Sequence>> running_;  // by id
};

}  // namespace ponder
