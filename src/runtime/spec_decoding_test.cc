// Speculative decoding end to end on the tiny models: the output (tokens and logprobs) is bitwise
// that of plain decoding, greedy and seeded, alone and batched with requests arriving at random
// moments, in a pool tight enough to preempt, with cancels, whatever the guesses (a replay of the
// target's own output at a chosen acceptance, prompt lookup, a draft model); what was guessed and
// kept is counted; the rejected guesses' blocks go back to the pool.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "runtime/draft_length.h"
#include "runtime/draft_model.h"
#include "runtime/engine.h"
#include "runtime/engine_test_support.h"
#include "runtime/ngram_draft.h"
#include "runtime/replay_draft.h"
#include "runtime/spec_bench.h"

namespace ponder {
namespace {

EngineConfig with_draft(EngineConfig c, std::shared_ptr<DraftSource> draft, int32_t min_draft,
                        int32_t max_draft) {
  c.draft = std::move(draft);
  c.min_draft = min_draft;
  c.max_draft = max_draft;
  return c;
}

// The plain output of r, then the same with guesses: a replay of that output right with
// probability 0.7 (fixed length 4, then adaptive up to 8), and prompt lookup; alone, and beside
// others arriving at random moments in a pool that preempts.
void check_exact(const std::string& type, float temp, uint32_t seed) {
  auto f = load(type);
  const int32_t n_vocab = static_cast<int32_t>(f->model->config().n_vocab);
  const auto prompt = prompt_tokens(f->tokenizer, 3);
  const EngineRequest target = request(prompt, 40, temp, 42);
  Stream::Choice plain;
  {
    Engine engine(*f->model, f->tokenizer, config(2048));
    plain = run_one(engine, target);
  }
  ASSERT_EQ(plain.tokens.size(), 40u);
  auto replay = std::make_shared<ReplayDraft>(plain.tokens, static_cast<int32_t>(prompt.size()),
                                              0.7, n_vocab, seed);
  struct Case {
    std::shared_ptr<DraftSource> draft;
    int32_t min_draft, max_draft;
  };
  // A real draft: the same tiny weights in another type (random weights: whether two types agree
  // on a greedy token is luck; these pairs agree on some of the 40).
  auto other = load(type == "Q4_K_M" || type == "Q8_0" ? "F16" : "Q4_K_M");
  auto draft_model = DraftModel::create(*other->model, other->tokenizer, f->tokenizer, n_vocab);
  ASSERT_TRUE(draft_model.has_value()) << draft_model.status().message();
  std::shared_ptr<DraftSource> drafter(std::move(*draft_model));
  const Case cases[] = {
      {replay, 4, 4}, {replay, 0, 8}, {std::make_shared<NgramDraft>(), 0, 6}, {drafter, 3, 3}};
  for (const Case& k : cases) {
    const std::string what = type + " " + k.draft->name() + " " + std::to_string(k.min_draft);
    {
      Engine engine(*f->model, f->tokenizer,
                    with_draft(config(2048), k.draft, k.min_draft, k.max_draft));
      const Stream::Choice got = run_one(engine, target);
      EXPECT_EQ(got.tokens, plain.tokens) << what;
      EXPECT_EQ(got.logprobs, plain.logprobs) << what;
      EXPECT_EQ(got.content, plain.content) << what;
      if (k.draft == drafter) {
        EXPECT_GT(got.stats.n_draft_accepted, 0) << what;
      }
      if (k.draft == replay && k.min_draft > 0) {  // (adaptive may back off: rows are dear here)
        EXPECT_GT(got.stats.n_drafted, 0) << what;
        EXPECT_GT(got.stats.n_draft_accepted, 0) << what;
        EXPECT_LT(got.stats.n_draft_accepted, got.stats.n_drafted) << what;
        engine.wait_idle();
        const EngineMetrics m = engine.metrics();
        EXPECT_EQ(m.total.drafted_tokens, got.stats.n_drafted);
        EXPECT_EQ(m.total.draft_accepted_tokens, got.stats.n_draft_accepted);
        // Fewer steps than tokens: some steps kept guesses.
        EXPECT_LT(m.total.steps, 1 + static_cast<int64_t>(plain.tokens.size())) << what;
      }
      expect_clean(engine);
    }
    // Batched, arriving at random moments, in a pool that preempts.
    std::mt19937 rng(seed);
    Engine engine(*f->model, f->tokenizer,
                  with_draft(config(256, 4, 7 + static_cast<int32_t>(rng() % 9)), k.draft,
                             k.min_draft, k.max_draft));
    std::vector<std::unique_ptr<Stream>> others;
    Stream mine;
    EngineRequest t = target;
    t.sink = mine.sink();
    const int n_others = 3;
    const int target_at = static_cast<int>(rng() % (n_others + 1));
    for (int i = 0; i <= n_others; ++i) {
      if (i == target_at) {
        ASSERT_TRUE(engine.submit(t).has_value());
      } else {
        others.push_back(std::make_unique<Stream>());
        EngineRequest o = request(prompt_tokens(f->tokenizer, 10 + i),
                                  30 + static_cast<int32_t>(rng() % 20), 0.7f, rng());
        o.sink = others.back()->sink();
        auto id = engine.submit(std::move(o));
        ASSERT_TRUE(id.has_value()) << id.status().message();
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 300));
    }
    mine.wait();
    for (auto& o : others) o->wait();
    EXPECT_EQ(mine.choices[0].tokens, plain.tokens) << what << " batched";
    EXPECT_EQ(mine.choices[0].logprobs, plain.logprobs) << what << " batched";
    expect_clean(engine);
  }
}

class SpecDecodingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecDecodingTest, GreedyOutputIsBitwisePlainDecoding) { check_exact(GetParam(), 0, 5); }
TEST_P(SpecDecodingTest, SeededOutputIsBitwisePlainDecoding) { check_exact(GetParam(), 0.9f, 6); }

INSTANTIATE_TEST_SUITE_P(AllTypes, SpecDecodingTest,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M",
                                           "Q3_K_M", "Q2_K", "Q5_1", "Q5_0", "Q4_1", "Q4_0"));

// n > 1, a cancel in the middle of drafting, a constrained answer, a reasoning budget: the same
// as without guesses, and nothing left in the pool.
TEST(SpecDecodingTest, ChoicesCancelsAndBudgetsWithGuesses) {
  auto f = load("Q8_0");
  auto run = [&](std::shared_ptr<DraftSource> draft) {
    Engine engine(*f->model, f->tokenizer, with_draft(config(2048), draft, 2, 6));
    EngineRequest r = request(prompt_tokens(f->tokenizer, 4), 30, 0.9f, 9);
    r.n_choices = 3;
    r.starts_in_thinking = true;
    r.options.reasoning_budget = 12;
    Stream s;
    r.sink = s.sink();
    EXPECT_TRUE(engine.submit(r).has_value());
    // A long one, cancelled while it drafts.
    Stream c;
    EngineRequest l = request(prompt_tokens(f->tokenizer, 5), 1500, 0.5f, 3);
    l.sink = c.sink();
    auto id = engine.submit(l);
    EXPECT_TRUE(id.has_value()) << id.status().message();
    if (!id.has_value()) return s.choices;
    c.wait_tokens(20);
    EXPECT_TRUE(engine.cancel(*id));
    c.wait();
    s.wait(3);
    EXPECT_EQ(c.choices[0].stats.finish_reason, "cancelled");
    expect_clean(engine);
    return s.choices;
  };
  const auto plain = run(nullptr);
  const auto guessed = run(std::make_shared<NgramDraft>(1, 3));
  for (int32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(guessed.at(i).tokens, plain.at(i).tokens) << i;
    EXPECT_EQ(guessed.at(i).reasoning, plain.at(i).reasoning) << i;
    EXPECT_EQ(guessed.at(i).content, plain.at(i).content) << i;
    EXPECT_TRUE(guessed.at(i).stats.thinking_cut) << i;
  }
}

TEST(NgramDraftTest, GuessesWhatFollowedTheLatestEarlierOccurrence) {
  std::vector<int32_t> out;
  const std::vector<int32_t> t = {1, 2, 3, 4, 9, 2, 3, 5, 6, 7, 1, 2, 3};
  ngram_guess(t, 2, 4, 3, &out);  // "1 2 3" at 0: then 4 9 2
  EXPECT_EQ(out, (std::vector<int32_t>{4, 9, 2}));
  const std::vector<int32_t> u = {8, 2, 3, 5, 6, 9, 2, 3};
  ngram_guess(u, 2, 4, 8, &out);  // "2 3" latest at 1: then 5 6 9 2 3 (to the end)
  EXPECT_EQ(out, (std::vector<int32_t>{5, 6, 9, 2, 3}));
  ngram_guess(u, 3, 4, 8, &out);  // no 3-gram repeats
  EXPECT_TRUE(out.empty());
  ngram_guess(std::vector<int32_t>{5}, 1, 4, 8, &out);
  EXPECT_TRUE(out.empty());
}

// The benchmark's seeded sampling (`ponder bench --spec-temperature`): its text is not the greedy
// one, and the runs with guesses still give the plain run's tokens, guesses kept included.
TEST(SpecBenchTest, SeededSamplingRunsGiveThePlainTokens) {
  auto f = load("Q8_0");
  const int32_t n_vocab = static_cast<int32_t>(f->model->config().n_vocab);
  std::vector<SpecBenchCase> cases = replay_cases({0.7}, {4}, 8, n_vocab);
  SpecBenchCase ngram;
  ngram.source = "ngram";
  ngram.make_draft = [](const std::vector<int32_t>&) { return std::make_shared<NgramDraft>(); };
  cases.push_back(ngram);
  auto greedy = run_spec_bench(*f->model, f->tokenizer, config(256), 8, 32, cases, 1, 0.0f);
  auto sampled = run_spec_bench(*f->model, f->tokenizer, config(256), 8, 32, cases, 1, 1.5f);
  ASSERT_TRUE(greedy.has_value()) << greedy.status().message();
  ASSERT_TRUE(sampled.has_value()) << sampled.status().message();
  EXPECT_NE(greedy->plain_tokens, sampled->plain_tokens);
  ASSERT_EQ(sampled->rows.size(), 3u);
  for (const SpecBenchRow& r : sampled->rows) {
    EXPECT_TRUE(r.same_tokens) << r.c.source << " " << r.c.max_draft;
    EXPECT_EQ(r.tokens, 32) << r.c.source;
  }
  EXPECT_GT(sampled->rows[0].kept, 0);  // replay at 0.7, length 4: right guesses were kept
}

TEST(DraftLengthTest, FollowsAcceptanceDownToProbes) {
  DraftLength d;
  for (int i = 0; i < 200; ++i) d.observe(8, 8);
  EXPECT_EQ(d.next(0.05, 8), 8);               // right nearly always, rows cheap: the most
  EXPECT_LT(d.next(1.0, 8), d.next(0.05, 8));  // rows as dear as a step: fewer
  for (int i = 0; i < 200; ++i) d.observe(4, 0);
  EXPECT_LT(d.acceptance(), 0.01);
  int probes = 0;
  for (int i = 0; i < 4 * DraftLength::kProbeEvery; ++i) probes += d.next(0.1, 8);
  EXPECT_EQ(probes, 4);  // one guess every kProbeEvery steps
}

}  // namespace
}  // namespace ponder
