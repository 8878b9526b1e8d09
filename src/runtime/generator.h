// Generator: one sequence at a time on a Qwen2Model: feeds a prompt (reusing the longest prefix
// already in its KV cache, so a chat's earlier turns are not recomputed), then samples tokens
// until EOS, a stop string, max_tokens, the context end or a cancel, streaming text as it comes.
// The multi-user engine (continuous batching, shared prefix blocks) builds on the same forward
// pass; this is the single-sequence path behind `ponder run`, `ponder chat` and `ponder logits`.
// Depends on model, text, runtime/sampler.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "model/qwen2_model.h"
#include "runtime/request.h"
#include "runtime/sampler.h"
#include "text/tokenizer.h"

namespace ponder {

class Generator {
 public:
  // n_ctx: positions the KV cache holds. The model must outlive the generator.
  Generator(Qwen2Model& model, const text::Tokenizer& tokenizer, int32_t n_ctx,
            ThreadConfig threads, int32_t n_batch = 256);
  Generator(Qwen2Model& model, const text::Tokenizer& tokenizer, int32_t n_ctx, int n_threads,
            int32_t n_batch = 256)
      : Generator(model, tokenizer, n_ctx, ThreadConfig{n_threads, 0, false}, n_batch) {}

  int32_t n_ctx() const { return n_ctx_; }

  // Feeds `prompt` and generates. on_text receives whole UTF-8 characters as they are ready.
  // Fails on an empty prompt, a prompt that does not fit the context, or a bad token id.
  Expected<GenerateStats> generate(const std::vector<int32_t>& prompt, const GenerateOptions& opts,
                                   const std::function<void(std::string_view)>& on_text,
                                   const std::atomic<bool>* cancel = nullptr);

  // Runs `tokens` through the model after the cached prefix they share, filling logits
  // [n_new, n_vocab] for every new row when `all_logits`, else only for the last token.
  // Returns the number of reused (cached) tokens.
  Expected<int32_t> evaluate(const std::vector<int32_t>& tokens, bool all_logits,
                             std::vector<float>* logits);

  // Forgets the cache contents.
  void reset() { cached_.clear(); }

 private:
  Status forward_chunk(const std::vector<int32_t>& tokens, size_t begin, size_t end,
                       bool all_logits, float* logits);

  Qwen2Model& model_;
  const text::Tokenizer& tokenizer_;
  int32_t n_ctx_;
  int32_t n_batch_;
  ThreadPool pool_;                         // decode steps
  std::unique_ptr<ThreadPool> batch_pool_;  // prompt chunks, when --threads-batch differs
  KvCache cache_;
  std::vector<int32_t> blocks_;  // the sequence's blocks: 0, 1, 2, ...
  std::vector<int32_t> cached_;  // tokens whose K/V are in the cache, by position
};

}  // namespace ponder
