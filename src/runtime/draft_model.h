// DraftModel: the DraftSource backed by a smaller model with the same tokenizer (the 1.5B distill
// drafting for the 7B-32B). It owns the draft's KV cache and a KvPool of its own: one block table
// per target sequence, holding the K/V of the tokens the draft has computed for it. Each propose()
// brings every asked sequence up to its tokens (rolling back what the target rejected: the
// longest common prefix is kept, through the pool's prefix lookup; a long stretch such as the
// prompt is caught up a bounded number of rows per call), then generates greedily, batched: one
// forward pass per draft position with one row per sequence.
//
// The draft is only a guess: the engine verifies every token with the target, so nothing here
// affects the output, only how many tokens a step yields. Hence no error reaches the caller: a
// sequence the draft cannot serve (no room, too long, a token the draft does not know) simply
// gets no draft.
// Depends on model, text, runtime/kv_pool, runtime/draft_source.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "model/batch.h"
#include "model/kv_cache.h"
#include "model/qwen2_model.h"
#include "runtime/draft_source.h"
#include "runtime/kv_pool.h"
#include "text/tokenizer.h"

namespace ponder {

struct DraftModelOptions {
  int32_t kv_positions = 8192;  // room of the draft's KV cache, shared by every sequence
  int32_t max_seqs = 64;        // sequences kept at once (least recently asked evicted beyond)
  // Rows of a forward pass, and rows a propose() call spends catching up on long stretches (a
  // prompt): such a sequence is caught up over several calls and drafts once it is.
  int32_t max_rows = 256;
  // Set when several DraftModels share one Qwen2Model (one draft model serving several targets,
  // each on its own engine thread): the model's activations are one set, so each holds this lock
  // around its forward passes. Each keeps its own KV cache and pool.
  std::shared_ptr<std::mutex> forward_lock;
};

class DraftModel : public DraftSource {
 public:
  // Whether a draft with this tokenizer may draft for a target with that one: the token texts are
  // identical for every id below the smaller vocabulary, and BOS, EOS, the end-of-generation
  // tokens, <think> and </think> are the same ids. The error names the first differing id and
  // both texts.
  static Status check_tokenizers(const text::Tokenizer& draft, const text::Tokenizer& target);

  // Checks the tokenizers and makes the draft source. The model and tokenizers must outlive it;
  // the model's forward pass is used by this source only while propose() runs (its activations
  // are not shared between threads). target_n_vocab: rows of the target's logits (ids at or past
  // it, and padding ids of either tokenizer, are never proposed).
  static Expected<std::unique_ptr<DraftModel>> create(Qwen2Model& draft,
                                                      const text::Tokenizer& draft_tokenizer,
                                                      const text::Tokenizer& target_tokenizer,
                                                      int64_t target_n_vocab,
                                                      const DraftModelOptions& options = {});

  const char* name() const override { return "draft-model"; }
  // DraftModelOptions::max_rows, for an engine that sizes it by its step time (>= 1).
  void set_max_rows(int32_t rows) { options_.max_rows = std::max(rows, 1); }
  void propose(std::span<DraftAsk> asks, ThreadPool& pool) override;
  // Catch-up passes of a call (a new prompt) take at most kCatchUpShare of it, by the measured
  // time of a catch-up row (max_rows bounds them too).
  void set_step_limit(double seconds) override { step_limit_s_ = seconds; }
  static constexpr double kCatchUpShare = 0.4;
  void forget(uint64_t seq) override;

  // Seconds of draft compute per drafted token of one sequence: a moving average over the draft's
  // forward passes that yield draft tokens (pass time / tokens it yields), leaving out the passes
  // that catch up on a long stretch of new tokens (a prompt: a one-off, like the target's own
  // prefill). A draft of k tokens costs k passes (one catch-up of the accepted tokens, k - 1
  // single-token ones), so about k * seconds_per_token() per sequence. 0 before any measure.
  double seconds_per_token() const override { return seconds_per_token_; }

  // Introspection (tests, /metrics).
  const KvPool& kv_pool() const { return kv_; }
  int32_t n_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int64_t n_evictions() const { return n_evictions_; }  // sequences dropped for room
  // Ids at or past this are never proposed (nor padding ids below it).
  int32_t n_real_vocab() const { return n_real_vocab_; }
  bool is_proposable(int32_t id) const;

 private:
  struct Seq {
    std::vector<int32_t> table;     // the draft's KV blocks, in position order
    std::vector<int32_t> computed;  // tokens whose K/V the table holds, by position
    uint64_t last_asked = 0;        // propose() call that last used it
  };
  // One ask being served in this call.
  struct Work {
    DraftAsk* ask = nullptr;
    Seq* seq = nullptr;
    int32_t k = 0;        // draft tokens wanted
    int32_t n_begin = 0;  // catch-up: next position of ask->tokens to compute
    int32_t n_end = 0;    // catch-up: up to here in this call (the tokens' size: it drafts)
  };

  DraftModel(Qwen2Model& draft, const text::Tokenizer& tokenizer, std::vector<uint8_t> proposable,
             const DraftModelOptions& options);

  // Rolls seq back to its longest common prefix with tokens[0, n - 1) and reserves positions for
  // the catch-up and k - 1 fed draft tokens; returns the k it found room for (0: no draft).
  int32_t prepare(Seq& seq, std::span<const int32_t> tokens, int32_t k);
  bool evict_one();  // releases the least recently asked sequence not in this call
  void drop(Seq& seq);
  // Runs batch_ and turns its logit rows into draft tokens of logit_work_[i].
  bool run_pass(ThreadPool& pool, bool measure);
  int32_t argmax(const float* logits) const;  // over the proposable ids, lowest id on ties

  Qwen2Model& model_;
  const text::Tokenizer& tokenizer_;
  DraftModelOptions options_;
  int32_t n_ctx_;                    // positions the draft model takes
  int32_t n_real_vocab_;             // ids below this may be proposed, unless padding
  std::vector<uint8_t> proposable_;  // [n_real_vocab_]: 1 unless padding
  std::vector<std::pair<int32_t, int32_t>> ranges_;  // runs [begin, end) of proposable ids
  KvCache cache_;
  KvPool kv_;
  std::unordered_map<uint64_t, Seq> seqs_;
  uint64_t call_ = 0;  // propose() calls so far
  int64_t n_evictions_ = 0;

  // Reused across calls: no allocation per drafted token.
  std::vector<Work> work_;
  Batch batch_;
  std::vector<int32_t> logit_work_;  // the work index of each logit row of batch_
  std::vector<float> logits_;        // [n logit rows, n_vocab]

  double seconds_per_token_ = 0;
  double catch_up_row_s_ = 0;  // seconds per row of a long catch-up pass (moving average)
  double step_limit_s_ = 0;    // 0: no time bound (max_rows only)
};

}  // namespace ponder
