#include "runtime/generator.h"

#include <algorithm>

#include "base/timer.h"
#include "cpu/topology.h"
#include "runtime/kv_pool.h"
#include "runtime/stop_strings.h"
#include "text/stream_decoder.h"

namespace ponder {
namespace {
std::vector<int> pin_list(bool pin) {
  return pin ? cpu_topology().one_cpu_per_core : std::vector<int>{};
}
}  // namespace

Generator::Generator(Qwen2Model& model, const text::Tokenizer& tokenizer, int32_t n_ctx,
                     ThreadConfig threads, int32_t n_batch)
    : model_(model),
      tokenizer_(tokenizer),
      n_ctx_(n_ctx),
      n_batch_(n_batch),
      pool_(threads.n_threads, pin_list(threads.pin)),
      cache_(model.make_cache((n_ctx + kKvBlockSize - 1) / kKvBlockSize, kKvBlockSize)) {
  if (threads.n_threads_batch > 0 && threads.n_threads_batch != threads.n_threads) {
    batch_pool_ = std::make_unique<ThreadPool>(threads.n_threads_batch, pin_list(threads.pin));
  }
  blocks_.resize(static_cast<size_t>(cache_.n_blocks()));
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i] = static_cast<int32_t>(i);
}

Status Generator::forward_chunk(const std::vector<int32_t>& tokens, size_t begin, size_t end,
                                bool all_logits, float* logits) {
  Batch batch;
  batch.block_tables.push_back(blocks_);
  for (size_t i = begin; i < end; ++i) {
    batch.rows.push_back({tokens[i], static_cast<int32_t>(i), 0, all_logits || i + 1 == end});
  }
  ThreadPool& pool = (end - begin > 1 && batch_pool_) ? *batch_pool_ : pool_;
  Status st = model_.forward(batch, cache_, logits, pool);
  if (!st.is_ok()) {
    cached_.resize(std::min(cached_.size(), begin));
    return st;
  }
  cached_.resize(begin);
  cached_.insert(cached_.end(), tokens.begin() + static_cast<long>(begin),
                 tokens.begin() + static_cast<long>(end));
  return Status::ok();
}

Expected<int32_t> Generator::evaluate(const std::vector<int32_t>& tokens, bool all_logits,
                                      std::vector<float>* logits) {
  if (tokens.empty()) return Status::error("the prompt is empty");
  if (static_cast<int64_t>(tokens.size()) > n_ctx_) {
    return Status::errorf("the prompt has {} tokens but the context holds {}", tokens.size(),
                          n_ctx_);
  }
  const int64_t n_vocab = model_.config().n_vocab;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= n_vocab) {
      return Status::errorf("token {} at position {} is outside the vocabulary [0, {})", tokens[i],
                            i, n_vocab);
    }
  }
  // Reuse the common prefix, but always recompute the last token to get its logits.
  size_t reuse = 0;
  while (reuse < cached_.size() && reuse + 1 < tokens.size() && cached_[reuse] == tokens[reuse])
    ++reuse;
  cached_.resize(reuse);
  const size_t n_new = tokens.size() - reuse;
  logits->resize(static_cast<size_t>((all_logits ? n_new : 1) * n_vocab));
  for (size_t b = reuse; b < tokens.size(); b += static_cast<size_t>(n_batch_)) {
    const size_t e = std::min(tokens.size(), b + static_cast<size_t>(n_batch_));
    float* out = all_logits ? logits->data() + (b - reuse) * n_vocab : logits->data();
    PONDER_RETURN_IF_ERROR(forward_chunk(tokens, b, e, all_logits, out));
  }
  return static_cast<int32_t>(reuse);
}

Expected<GenerateStats> Generator::generate(const std::vector<int32_t>& prompt,
                                            const GenerateOptions& opts,
                                            const std::function<void(std::string_view)>& on_text,
                                            const std::atomic<bool>* cancel) {
  PONDER_RETURN_IF_ERROR(
      validate_sampler_params(opts.sampling, static_cast<int32_t>(model_.config().n_vocab)));
  GenerateStats stats;
  Timer total;
  std::vector<float> logits;
  PONDER_ASSIGN_OR_RETURN(stats.n_reused, evaluate(prompt, false, &logits));
  stats.n_prompt = static_cast<int32_t>(prompt.size());
  stats.prompt_s = total.seconds();

  Sampler sampler(static_cast<int32_t>(model_.config().n_vocab), opts.sampling);
  for (int32_t t : prompt) sampler.accept(t);
  text::StreamDecoder decoder(tokenizer_);
  StopStrings stops(opts.stop);
  std::vector<int32_t> seq = prompt;
  Timer gen;
  stats.finish_reason = "length";
  while (stats.n_gen < opts.max_tokens) {
    if (cancel != nullptr && cancel->load()) {
      stats.finish_reason = "cancelled";
      break;
    }
    const int32_t token = sampler.sample(logits.data());
    if (stats.n_gen == 0) {
      stats.ttft_s = total.seconds();
      gen.reset();
    }
    sampler.accept(token);
    stats.n_gen++;
    stats.tokens.push_back(token);
    if (opts.stop_at_eog && tokenizer_.is_eog(token)) {
      stats.finish_reason = "stop";
      break;
    }
    const std::string_view emit = stops.push(decoder.feed(token));
    if (!emit.empty()) on_text(emit);
    if (stops.stopped()) {
      stats.finish_reason = "stop";
      break;
    }
    if (static_cast<int32_t>(seq.size()) >= n_ctx_) {
      stats.finish_reason = "context";
      break;
    }
    seq.push_back(token);
    // Decode: only the new token runs; the rest is in the cache.
    logits.resize(static_cast<size_t>(model_.config().n_vocab));
    PONDER_RETURN_IF_ERROR(forward_chunk(seq, seq.size() - 1, seq.size(), false, logits.data()));
  }
  if (!stops.stopped()) {
    std::string rest = decoder.flush();
    std::string tail(stops.push(rest));
    tail += stops.flush();
    if (!tail.empty()) on_text(tail);
  }
  stats.gen_s = stats.n_gen > 0 ? gen.seconds() : 0;
  return stats;
}

}  // namespace ponder
