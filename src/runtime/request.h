// What a client asks of the runtime and what comes back: generation options, the events a
// request streams (tokens with their text, split into R1's reasoning and answer; then one final
// event with usage, timings and the finish reason), and thread settings. Shared by the Engine
// (many requests at once) and the Generator (`ponder logits`).
// Depends on runtime/sampler.h.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "runtime/sampler.h"

namespace ponder {

struct GenerateOptions {
  int32_t max_tokens = 4096;  // 0: up to the context
  SamplerParams sampling;
  std::vector<std::string> stop;  // stop strings (not emitted)
  bool stop_at_eog = true;        // stop at EOS / end-of-turn tokens
  // Context shift (when the engine allows it): positions kept at the start when the context
  // fills; -1 the whole prompt; kKeepDefault: the engine's --keep.
  static constexpr int32_t kKeepDefault = INT32_MIN;
  int32_t n_keep = kKeepDefault;
  // R1: thinking tokens after which "</think>" and a blank line are forced, so the model answers
  // (-1: no limit). Engine::end_thinking() does the same at once.
  int32_t reasoning_budget = -1;
  // Constrained decoding: the answer is a sentence of this grammar. When the output starts
  // inside R1's thinking, the thinking is free and the grammar starts after "</think>"; an
  // end of sequence sampled while thinking becomes "</think>", so an answer always comes.
  std::shared_ptr<grammar::Grammar> grammar;
};

struct GenerateStats {
  int32_t n_prompt = 0;          // prompt tokens
  int32_t n_reused = 0;          // of those, taken from the KV cache
  int32_t n_gen = 0;             // generated tokens
  int32_t n_reasoning = 0;       // of those, inside R1's thinking (up to and with </think>)
  int32_t n_preempted = 0;       // times the request was sent back to the queue for lack of KV room
  int32_t n_shifts = 0;          // context shifts (the context filled; --context-shift)
  int32_t n_drafted = 0;         // speculative decoding: guesses verified
  int32_t n_draft_accepted = 0;  // of those, kept (the target sampled the same token)
  bool from_response_cache = false;      // replayed by the server from its response cache
  bool thinking_cut = false;             // "</think>" was forced (budget spent, or end_thinking())
  bool thinking_cut_on_request = false;  // by end_thinking() ("answer now")
  double queue_s = 0;                    // from submission to the first step that ran its prompt
  double prompt_s = 0;                   // time to process the prompt (the new part)
  double gen_s = 0;                      // time from the first to the last generated token
  double ttft_s = 0;                     // time to first token, from the call
  double max_gap_s = 0;                  // longest time between two generated tokens
  std::string finish_reason;    // "stop" (EOS, stop string, grammar complete), "length", "context",
                                // "cancelled"
  std::vector<int32_t> tokens;  // generated ids
};

// Threads: decode steps (few rows) and prompt chunks (many rows) may use different counts
// (--threads / --threads-batch); pinning puts thread i on the i-th physical core.
struct ThreadConfig {
  int n_threads = 1;
  int n_threads_batch = 0;  // 0: n_threads
  bool pin = false;
};

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;  // natural log of the model's probability (softmax of the raw logits)
};

struct EngineEvent {
  enum class Kind { kToken, kDone, kProgress };
  Kind kind = Kind::kToken;
  uint64_t request = 0;
  int32_t choice = 0;  // which of the request's n choices
  // kToken: the token and the text it completed, split at R1's </think>. Text may lag a token (a
  // character split across tokens, a possible stop string held back); kDone carries the rest.
  int32_t token = -1;
  std::string reasoning;
  std::string content;
  float logprob = 0;                       // when logprobs were asked
  std::vector<TokenLogprob> top_logprobs;  // the most likely tokens, when asked
  // kProgress (when the request asked for it): its prompt is being processed; stats.n_prompt and
  // stats.n_reused say how big it is and how much came from the cache, prompt_done how much of
  // it is computed, stats.prompt_s the time since it started.
  int32_t prompt_done = 0;
  // kDone: usage, timings, finish reason; error is set when the request failed.
  GenerateStats stats;
  std::string error;
};

// Called on the engine thread: it must return quickly (queue the event, post it to an I/O
// thread), never block on a socket or a terminal.
using EventSink = std::function<void(EngineEvent&&)>;

struct EngineRequest {
  std::vector<int32_t> prompt;
  GenerateOptions options;
  bool starts_in_thinking = false;  // R1: output opens inside <think>; split reasoning / content
  bool split_reasoning = true;      // with starts_in_thinking: false keeps the thinking in content
  int32_t n_choices = 1;            // n: several completions sharing the prompt's KV
  int32_t n_logprobs = -1;          // -1: none; 0: the chosen token's; k (<= 20): and the top k
  // Prefill only: compute the prompt into the prefix cache and end (one kDone, no tokens), at
  // the back of the queue like any prompt. Chat clients warm the next turn's prefix with it.
  bool prefill_only = false;
  bool report_progress =
      false;  // kProgress events while the prompt is processed (llama.cpp's return_progress)
  EventSink sink;
};

}  // namespace ponder
