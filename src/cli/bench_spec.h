// `ponder bench --spec-replay 0.5,0.7,0.9 --draft-lengths 2,4,8` and `ponder bench --spec ngram`:
// speculative decoding against plain decoding of the same request, in alternating repetitions
// (runtime/spec_bench.h), as a table: generation speed, its ratio to plain, guesses verified and
// kept, tokens per step, and whether the output was the plain run's.
#pragma once

#include <string>
#include <vector>

#include "cli/model_session.h"

namespace ponder::cli {

struct SpecBenchFlags {
  std::vector<double> replay;             // acceptances (--spec-replay)
  std::vector<int32_t> lengths{2, 4, 8};  // fixed draft lengths (--draft-lengths), and adaptive
  std::string spec = "off";               // --spec ngram: also prompt lookup
  std::string draft_path;                 // --draft MODEL: also this draft model
  float temperature = 0;                  // --spec-temperature: 0 greedy, else seeded sampling
  bool any() const { return !replay.empty() || spec != "off" || !draft_path.empty(); }
};

int run_spec_cmd(ModelSession& s, const SpecBenchFlags& flags, int32_t n_prompt, int32_t n_gen,
                 int threads, int reps, const std::string& output);

}  // namespace ponder::cli
