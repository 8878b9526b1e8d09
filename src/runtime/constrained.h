// What the engine and the benchmarks share of constrained decoding: the vocabulary a grammar's
// masks are computed over (each token's bytes; control and added tokens never chosen by a mask),
// and the grammar benchmark behind `ponder bench --json-schema`: compile time, and the time to
// compute the allowed tokens at each step of a generation that follows the grammar.
// Depends on grammar/ and text/tokenizer.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "grammar/token_mask.h"
#include "text/tokenizer.h"

namespace ponder {

// n_vocab >= the tokenizer's: ids past it (the model's padding) are never allowed.
std::shared_ptr<const grammar::Vocabulary> grammar_vocabulary(const text::Tokenizer& tokenizer,
                                                              int32_t n_vocab);

struct GrammarBenchResult {
  double compile_ms = 0;  // GBNF text -> Grammar
  int32_t n_steps = 0;    // tokens generated through the grammar
  double mask_p50_ms = 0, mask_p99_ms = 0,
         mask_max_ms = 0;  // allowed() per step, memo cold at the start
  double mask_mean_ms = 0;
  int64_t n_states = 0;  // automaton states built
};

// Walks n_steps tokens through the grammar from a fresh compile: at each step the allowed set is
// computed (timed), then a token is drawn from it (seeded, favouring short tokens the way a
// model's output does), until n_steps or the grammar completes.
Expected<GrammarBenchResult> run_grammar_bench(const std::string& gbnf,
                                               std::shared_ptr<const grammar::Vocabulary> vocab,
                                               int32_t n_steps, uint64_t seed);

}  // namespace ponder
