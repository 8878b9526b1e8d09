#include "runtime/spec_bench.h"

#include <condition_variable>
#include <mutex>
#include <random>

#include "runtime/replay_draft.h"

namespace ponder {
namespace {

struct Run {
  std::vector<int32_t> tokens;
  GenerateStats stats;
};

Expected<Run> run_once(Engine& engine, const std::vector<int32_t>& prompt, int32_t n_gen,
                       float temperature) {
  EngineRequest r;
  r.prompt = prompt;
  r.options.max_tokens = n_gen;
  r.options.sampling.temperature = temperature;
  r.options.sampling.top_k = 0;
  r.options.sampling.top_p = 1.0f;
  r.options.sampling.min_p = 0.0f;
  r.options.sampling.seed = 1;
  r.options.stop_at_eog = false;
  std::mutex mu;
  std::condition_variable cv;
  Run run;
  bool done = false;
  std::string error;
  r.sink = [&](EngineEvent&& ev) {
    std::lock_guard<std::mutex> lock(mu);
    if (ev.kind == EngineEvent::Kind::kToken) run.tokens.push_back(ev.token);
    if (ev.kind != EngineEvent::Kind::kDone) return;
    run.stats = ev.stats;
    error = ev.error;
    done = true;
    cv.notify_all();
  };
  PONDER_RETURN_IF_ERROR(engine.submit(std::move(r)).status());
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  if (!error.empty()) return Status::error(error);
  return run;
}

double tg_ts(const Run& r) { return r.stats.gen_s > 0 ? (r.stats.n_gen - 1) / r.stats.gen_s : 0; }

}  // namespace

std::vector<SpecBenchCase> replay_cases(const std::vector<double>& acceptances,
                                        const std::vector<int32_t>& lengths, int32_t n_prompt,
                                        int32_t n_vocab) {
  std::vector<SpecBenchCase> cases;
  for (double a : acceptances) {
    std::vector<std::pair<int32_t, int32_t>> ranges;
    for (int32_t l : lengths) ranges.push_back({l, l});
    ranges.push_back({0, 8});  // adaptive
    for (auto [lo, hi] : ranges) {
      SpecBenchCase c;
      c.source = "replay";
      c.acceptance = a;
      c.min_draft = lo;
      c.max_draft = hi;
      c.make_draft = [=](const std::vector<int32_t>& plain) {
        return std::make_shared<ReplayDraft>(plain, n_prompt, a, n_vocab);
      };
      cases.push_back(c);
    }
  }
  return cases;
}

Expected<SpecBench> run_spec_bench(Qwen2Model& model, const text::Tokenizer& tokenizer,
                                   const EngineConfig& base, int32_t n_prompt, int32_t n_gen,
                                   const std::vector<SpecBenchCase>& cases, int reps,
                                   float temperature) {
  if (n_prompt < 1 || n_gen < 2 || reps < 1)
    return Status::errorf("spec bench: --prompt {} and --gen {} (at least 2), -r {}", n_prompt,
                          n_gen, reps);
  std::mt19937_64 rng(7);
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < n_prompt; ++i)
    prompt.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(model.config().n_vocab)));
  SpecBench out;
  for (const SpecBenchCase& c : cases) out.rows.push_back({c, {}, {}});
  Engine plain(model, tokenizer, base);
  // A warm-up, and the output every run must give.
  PONDER_ASSIGN_OR_RETURN(Run warm, run_once(plain, prompt, n_gen, temperature));
  const std::vector<int32_t>& expected = warm.tokens;
  out.plain_tokens = expected;
  // Plain runs bracket every case (plain, case, plain, case, ..., plain): each ratio is over the
  // mean of the plain runs just before and after it, so a host whose speed drifts over the
  // minutes a repetition takes moves both sides alike.
  for (int rep = 0; rep < reps; ++rep) {
    PONDER_ASSIGN_OR_RETURN(Run p, run_once(plain, prompt, n_gen, temperature));
    double before = tg_ts(p);
    out.plain_tg_ts.push_back(before);
    for (SpecBenchRow& row : out.rows) {
      EngineConfig cfg = base;
      cfg.draft = row.c.make_draft(expected);
      cfg.min_draft = row.c.min_draft;
      cfg.max_draft = row.c.max_draft;
      Engine engine(model, tokenizer, cfg);
      PONDER_ASSIGN_OR_RETURN(Run r, run_once(engine, prompt, n_gen, temperature));
      PONDER_ASSIGN_OR_RETURN(Run p_after, run_once(plain, prompt, n_gen, temperature));
      const double after = tg_ts(p_after);
      out.plain_tg_ts.push_back(after);
      row.tg_ts.push_back(tg_ts(r));
      row.ratios.push_back(tg_ts(r) / ((before + after) / 2));
      before = after;
      row.drafted += r.stats.n_drafted;
      row.kept += r.stats.n_draft_accepted;
      row.steps += engine.metrics().total.steps;
      row.tokens += r.stats.n_gen;
      row.same_tokens = row.same_tokens && r.tokens == expected;
    }
  }
  return out;
}

}  // namespace ponder
