#include "cli/bench_spec.h"

#include <fmt/core.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cpu/cpu_features.h"
#include "runtime/bench.h"
#include "runtime/draft_model.h"
#include "runtime/ngram_draft.h"
#include "runtime/replay_draft.h"
#include "runtime/spec_bench.h"

namespace ponder::cli {

int run_spec_cmd(ModelSession& s, const SpecBenchFlags& flags, int32_t n_prompt, int32_t n_gen,
                 int threads, int reps, const std::string& output) {
  const int32_t n_vocab = static_cast<int32_t>(s.model->config().n_vocab);
  std::vector<SpecBenchCase> cases = replay_cases(flags.replay, flags.lengths, n_prompt, n_vocab);
  if (flags.spec == "ngram") {
    SpecBenchCase c;
    c.source = "ngram";
    c.make_draft = [](const std::vector<int32_t>&) { return std::make_shared<NgramDraft>(); };
    cases.push_back(c);
  }
  std::unique_ptr<ModelSession> draft_session;
  std::shared_ptr<DraftSource> draft_model;
  if (!flags.draft_path.empty()) {
    auto opened = ModelSession::open(flags.draft_path);
    if (!opened.has_value()) return fail("bench", opened.status().message());
    draft_session = std::move(*opened);
    draft_session->model->wait_x16_cache_write();
    auto made = DraftModel::create(*draft_session->model, draft_session->tokenizer, s.tokenizer,
                                   s.model->config().n_vocab);
    if (!made.has_value())
      return fail("bench",
                  fmt::format("--draft {}: {}", flags.draft_path, made.status().message()));
    draft_model = std::shared_ptr<DraftSource>(std::move(*made));
    SpecBenchCase c;
    c.source = "draft";
    c.make_draft = [draft_model](const std::vector<int32_t>&) { return draft_model; };
    cases.push_back(c);
  }
  EngineConfig base;
  base.max_running = 1;
  base.kv_positions = n_prompt + n_gen + 64;
  base.threads.n_threads = threads;
  auto bench =
      run_spec_bench(*s.model, s.tokenizer, base, n_prompt, n_gen, cases, reps, flags.temperature);
  if (!bench.has_value()) return fail("bench", bench.status().message());
  const double plain = median(bench->plain_tg_ts);
  nlohmann::json out = nlohmann::json::array();
  if (output == "md") {
    fmt::print(
        "model: {}, CPU: {} [{}], {} threads, prompt {} tokens, {} generated, {} reps, {}\n\n",
        s.file.path(), cpu_features().brand, isa_name(active_isa()), threads, n_prompt, n_gen, reps,
        flags.temperature > 0 ? fmt::format("seeded sampling at temperature {}", flags.temperature)
                              : "greedy");
    fmt::print("plain decoding: tg {:.2f} t/s (median)\n\n", plain);
    fmt::print(
        "| guesses | right | draft length | tg (t/s) | x plain | kept / verified | tokens per "
        "step | same tokens |\n|---|---|---|---|---|---|---|---|\n");
  }
  for (const SpecBenchRow& r : bench->rows) {
    // The share of right guesses the generated positions drew (replay's are drawn once each).
    const bool replay = r.c.source == "replay";
    const double drawn =
        replay ? ReplayDraft({}, n_prompt, r.c.acceptance, 1).right_share(n_gen) : 0.0;
    const std::string length = r.c.min_draft == r.c.max_draft
                                   ? std::to_string(r.c.max_draft)
                                   : fmt::format("adaptive {}..{}", r.c.min_draft, r.c.max_draft);
    const double kept_share = r.drafted > 0 ? static_cast<double>(r.kept) / r.drafted : 0;
    const double per_step = r.steps > 0 ? static_cast<double>(r.tokens) / r.steps : 0;
    if (output == "md") {
      fmt::print("| {} | {} | {} | {:.2f} | {:.2f}x | {:.0f}% of {} | {:.2f} | {} |\n", r.c.source,
                 replay ? fmt::format("{:.0f}% ({:.0f}% of these {})", 100 * r.c.acceptance,
                                      100 * drawn, n_gen)
                        : "-",
                 length, median(r.tg_ts), median(r.ratios), 100 * kept_share, r.drafted, per_step,
                 r.same_tokens ? "yes" : "NO");
    } else {
      out.push_back({{"source", r.c.source},
                     {"acceptance", r.c.acceptance},
                     {"acceptance_drawn", drawn},
                     {"min_draft", r.c.min_draft},
                     {"max_draft", r.c.max_draft},
                     {"tg_ts", median(r.tg_ts)},
                     {"plain_tg_ts", plain},
                     {"ratio", median(r.ratios)},
                     {"drafted", r.drafted},
                     {"kept", r.kept},
                     {"tokens_per_step", per_step},
                     {"same_tokens", r.same_tokens}});
    }
  }
  if (output == "json") fmt::print("{}\n", out.dump(2));
  for (const SpecBenchRow& r : bench->rows) {
    if (!r.same_tokens) return fail("bench", "a run with guesses gave other tokens than plain");
  }
  return 0;
}

}  // namespace ponder::cli
