// The speculative-decoding benchmark behind `ponder bench --spec-replay` / `--spec ngram`: one
// request (a random prompt, greedy or seeded sampling, end of sequence ignored) decoded plainly
// and with guesses, in alternating repetitions, each configuration in an engine of its own. Every
// run with guesses is checked to give the plain run's tokens (the exactness the engine promises),
// and the figures are its generation speed (first to last token) against the plain run of the
// same repetition.
// Depends on runtime/engine.h, runtime/replay_draft.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/engine.h"

namespace ponder {

struct SpecBenchCase {
  std::string source;  // "replay", "ngram", or a draft model's name
  // replay: the share of right guesses; else unused. A source: made per repetition by make_draft.
  double acceptance = 0;
  int32_t min_draft = 0, max_draft = 8;  // equal: a fixed length
  std::function<std::shared_ptr<DraftSource>(const std::vector<int32_t>& plain_output)> make_draft;
};

struct SpecBenchRow {
  SpecBenchCase c;
  std::vector<double> tg_ts;   // per repetition
  std::vector<double> ratios;  // per repetition: t/s over the mean of the plain runs around it
  int64_t drafted = 0, kept = 0, steps = 0, tokens = 0;
  bool same_tokens = true;  // every run gave the plain run's tokens
};

struct SpecBench {
  std::vector<int32_t> plain_tokens;  // the plain run's output, which every case must give
  std::vector<double> plain_tg_ts;    // every plain run (before and after each case)
  std::vector<SpecBenchRow> rows;
};

// base: the engine configuration without a draft (threads, KV room for n_prompt + n_gen).
// temperature <= 0: greedy; else seeded sampling from the whole vocabulary at that temperature
// (no top-k, top-p or min-p), the same seed in every run, so plain and drafted runs must agree.
Expected<SpecBench> run_spec_bench(Qwen2Model& model, const text::Tokenizer& tokenizer,
                                   const EngineConfig& base, int32_t n_prompt, int32_t n_gen,
                                   const std::vector<SpecBenchCase>& cases, int reps,
                                   float temperature = 0);

// Replay cases: each acceptance at each fixed length, and adaptive (lengths 0..8).
std::vector<SpecBenchCase> replay_cases(const std::vector<double>& acceptances,
                                        const std::vector<int32_t>& lengths, int32_t n_prompt,
                                        int32_t n_vocab);

}  // namespace ponder
