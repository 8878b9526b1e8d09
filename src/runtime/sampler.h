// Sampler: picks the next token from a logits vector. Pure logic over [n_vocab] floats: no model,
// no KV, no threads. The chain, in order (llama.cpp's default order, with logit bias after the
// penalties):
//   penalties (repetition / presence / frequency over the last penalty_last_n accepted tokens)
//   -> logit bias -> top-k -> top-p -> min-p -> temperature -> draw
// temperature <= 0 is greedy: the argmax of the penalized, biased logits (no random draw).
// All buffers are allocated by the constructor; sample() and accept() never allocate, so a
// running request costs no heap traffic per token. A Sampler belongs to one sequence; the same
// seed and the same inputs give the same tokens on every machine (the draw uses its own
// uniform-double conversion, not a library distribution).
// Depends on base only.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ponder {

struct SamplerParams {
  float temperature = 0.6f;        // DeepSeek-R1's recommended value; <= 0: greedy
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off
  float min_p = 0.05f;             // <= 0: off
  int32_t penalty_last_n = 64;     // tokens in the penalty window; <= 0: no penalties
  float repeat_penalty = 1.0f;     // 1: off. Divides positive logits, multiplies negative ones.
  float presence_penalty = 0.0f;   // subtracted once from every token in the window
  float frequency_penalty = 0.0f;  // subtracted once per occurrence in the window
  std::vector<std::pair<int32_t, float>> logit_bias;  // id -> added to its logit (-inf bans it)
  uint64_t seed = 0;
};

// Checks what a client may send (HTTP, CLI): ids inside the vocabulary, no NaN, top_p > 0,
// repeat_penalty > 0. The Sampler constructor CHECKs it, so validate at the boundary first.
Status validate_sampler_params(const SamplerParams& params, int32_t n_vocab);

struct TokenCandidate {
  int32_t id;
  float logit;  // after penalties, bias and temperature
  float p;      // probability among the survivors (filled by sample())
};

class Sampler {
 public:
  Sampler(int32_t n_vocab, SamplerParams params);

  // The next token for logits[n_vocab] (not modified). Does not add it to the history: call
  // accept() with the token actually used (it may differ, e.g. a forced stop).
  int32_t sample(const float* logits);

  // Adds a token to the penalty window (prompt tokens too, if they should be penalized).
  void accept(int32_t token);

  // Forgets the history and restarts the random stream from `seed`.
  void reset(uint64_t seed);

  // The candidates that survived the last sample(), most likely first when the chain sorted them
  // (top-k / top-p; greedy gives the single winner), with their final probabilities.
  const TokenCandidate* candidates() const { return cand_.data(); }
  int32_t n_candidates() const { return n_cand_; }

  const SamplerParams& params() const { return params_; }
  int32_t n_vocab() const { return n_vocab_; }

 private:
  void apply_penalties();
  void apply_top_k(int32_t k);
  void apply_top_p(float p, float min_p);  // min_p: the next step, to skip its losers early
  void apply_min_p(float min_p);
  static constexpr int32_t kTopPBuckets = 1024;
  // Sorts candidates [0, n_sorted_) descending by logit for at least `m` of them.
  void sort_prefix(int32_t m);
  int32_t draw();
  double uniform();  // [0, 1), 53 bits

  int32_t n_vocab_;
  SamplerParams params_;
  std::mt19937_64 rng_;

  std::vector<TokenCandidate> cand_;  // [n_vocab]; [0, n_cand_) are the live candidates
  int32_t n_cand_ = 0;
  int32_t n_sorted_ = 0;  // the first n_sorted_ live candidates are sorted descending

  // Penalty window: a ring of the last penalty_last_n accepted tokens and their counts.
  std::vector<int32_t> window_;  // [penalty_last_n]
  int32_t window_size_ = 0;
  int32_t window_head_ = 0;     // next slot to write
  std::vector<int32_t> count_;  // [n_vocab]: occurrences in the window
  std::vector<uint32_t> seen_;  // [n_vocab]: stamp of the last sample() that penalized the id
  uint32_t stamp_ = 0;

  std::vector<double> bucket_mass_ = std::vector<double>(kTopPBuckets);  // top-p's histogram
};

}  // namespace ponder
