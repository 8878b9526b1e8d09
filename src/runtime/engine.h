// Engine: serves many requests at once from one model. It owns the KV cache and its block pool,
// the scheduler, the thread pools and one engine thread that runs steps: each step is one
// forward pass over the rows the scheduler chose (decode rows of running requests, then chunks
// of waiting prompts), then sampling, detokenizing and the R1 reasoning/answer split for every
// row that asked for logits, then events to each request's sink.
// submit() and cancel() may be called from any thread and never wait for a step: they take a
// mutex that the engine thread holds only to swap queues. A cancelled request frees its blocks
// before the next step, during its prefill too.
// Results never depend on the batch: the kernels are batch invariant, so a request with a fixed
// seed gets the same tokens alone, beside others, from the prefix cache, or after a preemption.
// Depends on model, text, runtime (scheduler, sampler, stop strings, reasoning splitter).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "grammar/token_mask.h"
#include "model/qwen2_model.h"
#include "runtime/draft_source.h"
#include "runtime/engine_metrics.h"
#include "runtime/kv_disk.h"
#include "runtime/request.h"
#include "runtime/scheduler.h"
#include "runtime/step_time_model.h"
#include "text/tokenizer.h"

namespace ponder {

struct EngineConfig {
  int32_t kv_positions = 4096;  // -c/--ctx: positions in the KV pool, for all requests together
  int32_t max_context = 0;      // per request, prompt + max_tokens (0: kv_positions, capped by
                                // the model's trained context)
  int32_t max_running = 8;      // sequences in the batch at once
  int32_t max_batch = 512;      // rows per forward pass (--batch-size)
  int32_t max_queue = 64;       // requests waiting before submit() says the engine is busy
  double max_step_s = 0.25;     // a prompt chunk beside running streams keeps a step this short
  // --context-shift: a request may ask for more tokens than its context holds; when it fills, the
  // first n_keep positions stay, half of the rest is dropped, the keys after it are re-rotated
  // (llama.cpp's context shift). Off: such a request is refused before any work.
  bool context_shift = false;
  int32_t n_keep = 0;  // --keep: the default kept positions (-1: the whole prompt)
  // Speculative decoding (--draft / --spec): where guesses come from (null: none), and how many
  // a decoding sequence drafts a step: chosen by its acceptance and the measured costs
  // (runtime/draft_length.h), within [min_draft, max_draft] (equal: a fixed length).
  std::shared_ptr<DraftSource> draft;
  int32_t min_draft = 0;
  int32_t max_draft = 8;
  ThreadConfig threads;
  // The prefix cache on disk (--kv-disk; runtime/kv_disk.h): off when kv_disk.dir is empty. Its
  // files are keyed by the model file's fingerprint (gguf/model_fingerprint.h) and the numerics.
  KvDiskOptions kv_disk;
  // The share of max_step_s that reading a prefix back from disk may add to a step beside
  // decoding streams (at the measured read rate; at least one block a step): a long prefix is
  // read over several steps instead of stalling the streams (alone, it is read at once).
  double kv_disk_read_share = 0.1;
  std::string model_fingerprint;
};

class Engine {
 public:
  // The model and tokenizer must outlive the engine. Starts the engine thread.
  Engine(Qwen2Model& model, const text::Tokenizer& tokenizer, EngineConfig config);
  ~Engine();  // stops the thread; unfinished requests end "cancelled"
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const EngineConfig& config() const { return config_; }
  int32_t max_context() const { return max_context_; }

  // Checks the request (tokens, sampling, context, queue room) and queues it; its id, or an
  // error that says what is wrong. Events go to request.sink on the engine thread.
  Expected<uint64_t> submit(EngineRequest request);
  // Ends a request (every choice) with finish reason "cancelled"; false when it is not running
  // or queued (finished, or unknown).
  bool cancel(uint64_t request);
  // R1: ends the thinking of every choice of a running request now ("</think>" and a blank line
  // are forced as its next tokens), so it answers. False when the request is not running or queued.
  bool end_thinking(uint64_t request);

  EngineMetrics metrics() const;
  // The disk tier (null when off): tests and benchmarks wait for its writes with flush().
  KvDisk* kv_disk() { return kv_disk_.get(); }
  // What decides the bits of the K/V rows this engine computes: the disk tier's key.
  std::string numerics_key() const;
  // Blocks until no request is queued or running (tests, benchmarks, the CLI).
  void wait_idle();

 private:
  struct SeqState;
  struct RequestState;
  void loop();
  void shift_context(SeqState& st, Sequence& seq);
  void force_end_of_thinking(SeqState& st, bool on_request);
  // Queues a request id for the engine thread (cancels_, end_thinking_); false if it is not live.
  bool push_if_live(std::vector<uint64_t>* queue,
                    uint64_t request);  // queue "</think>\n\n" unless already answering  // the
                                        // context is full: shift, or end it
  void admit(std::deque<std::pair<uint64_t, EngineRequest>>& inbox);
  void step(ThreadPool& pool, ThreadPool* batch_pool);
  int32_t prefill_budget() const;
  int32_t disk_read_budget() const;  // blocks the disk tier may read this step
  // Speculative decoding: asks the draft source for the guesses of the decoding sequences.
  void propose_drafts(ThreadPool& pool);
  // Samples a sequence's rows of this step in order (one, or its draft's rows: the guesses the
  // target samples itself are kept, the first one it does not ends the run).
  void verify(const StepChunk& c, const float* logits, int64_t* emitted);
  void sample(SeqState& st, Sequence& seq, const float* logits);
  int32_t sample_constrained(SeqState& st, const float* logits);
  void finish(uint64_t seq_id, const std::string& reason, const std::string& error = "");

  Qwen2Model& model_;
  const text::Tokenizer& tokenizer_;
  EngineConfig config_;
  int32_t max_context_;
  KvCache cache_;
  std::unique_ptr<KvDisk> kv_disk_;  // after cache_: stopped (its writes done) before it goes

  // Shared with client threads, under mu_.
  mutable std::mutex mu_;
  std::condition_variable cv_;       // wakes the engine thread
  std::condition_variable idle_cv_;  // wakes wait_idle()
  std::deque<std::pair<uint64_t, EngineRequest>> inbox_;
  std::vector<uint64_t> cancels_;
  std::vector<uint64_t> end_thinking_;
  std::vector<int32_t> end_think_tokens_;                     // "</think>\n\n"
  int32_t think_end_token_ = -1;                              // "</think>" when it is one token
  std::shared_ptr<const grammar::Vocabulary> grammar_vocab_;  // token bytes for grammar masks
  std::vector<float> masked_logits_;  // [n_vocab] scratch of a constrained step
  std::map<uint64_t, bool> live_;     // requests queued or running (value unused)
  uint64_t next_request_ = 1;
  int32_t n_waiting_ = 0;  // requests the scheduler holds that have not started
  bool stop_ = false;
  bool idle_ = true;          // the engine thread has nothing to do and its gauges are up to date
  bool tier_copied_ = false;  // the disk tier copied blocks the pool holds for it
  MetricsRecorder recorder_;

  // Engine thread only.
  Scheduler scheduler_;
  uint64_t next_seq_ = 1;
  std::map<uint64_t, std::unique_ptr<SeqState>> seqs_;
  std::map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::vector<float> logits_;  // [max_running * (1 + max_draft), n_vocab]
  std::vector<DraftAsk> asks_;
  StepTimeModel step_time_;  // what steps cost here: sizes the prompt chunks beside streams

  std::thread thread_;
};

}  // namespace ponder
