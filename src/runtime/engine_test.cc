// The Engine end to end on the tiny real-format models: batch invariance (alone, batched with
// requests arriving at random moments, chunked, from the prefix cache, after preemption) for
// every weight format and both attention orders; prefix reuse counts; cancellation at each stage;
// the R1 second turn that prefills only the new user message; refusals before any work.
#include "runtime/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "runtime/engine_test_support.h"
#include "runtime/tiny_model_for_test.h"
#include "text/chat_template.h"

namespace ponder {
namespace {

// A target request alone, then beside up to 7 others arriving at random moments, in an engine
// with small batches (chunked prompts) and, for `tight`, a KV pool too small for all of them
// (preemption). Same tokens and logprobs, bit for bit.
void check_invariance(const std::string& type, bool flash, uint32_t seed) {
  auto f = load(type);
  f->model->set_flash_attention(flash);
  const auto target_prompt = prompt_tokens(f->tokenizer, 3);
  const EngineRequest target = request(target_prompt, 24, 0.8f, 42);
  Stream::Choice alone;
  {
    Engine engine(*f->model, f->tokenizer, config(2048));
    alone = run_one(engine, target);
    // Again, now from the prefix cache.
    Stream::Choice cached = run_one(engine, target);
    EXPECT_EQ(cached.stats.n_reused, static_cast<int32_t>(target_prompt.size()) - 1);
    EXPECT_EQ(cached.tokens, alone.tokens) << type;
    EXPECT_EQ(cached.logprobs, alone.logprobs) << type;
    expect_clean(engine);
  }
  ASSERT_EQ(alone.tokens.size(), 24u);
  for (bool tight : {false, true}) {
    std::mt19937 rng(seed + tight);
    Engine engine(*f->model, f->tokenizer,
                  config(tight ? 256 : 2048, 4, 7 + static_cast<int32_t>(rng() % 9)));
    const int n_others = 1 + static_cast<int>(rng() % 7);
    std::vector<std::unique_ptr<Stream>> others;
    Stream mine;
    EngineRequest t = target;
    t.sink = mine.sink();
    const int target_at = static_cast<int>(rng() % static_cast<uint32_t>(n_others + 1));
    for (int i = 0; i <= n_others; ++i) {
      if (i == target_at) {
        ASSERT_TRUE(engine.submit(t).has_value());
      } else {
        others.push_back(std::make_unique<Stream>());
        // Tight: long enough that any two of them overflow the pool together.
        const int32_t n_gen = (tight ? 40 : 8) + static_cast<int32_t>(rng() % 20);
        EngineRequest o = request(prompt_tokens(f->tokenizer, 10 + i), n_gen, 0.7f, rng());
        o.sink = others.back()->sink();
        ASSERT_TRUE(engine.submit(std::move(o)).has_value());
      }
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % (tight ? 200 : 3000)));
    }
    mine.wait();
    for (auto& o : others) o->wait();
    const Stream::Choice& got = mine.choices[0];
    EXPECT_EQ(got.tokens, alone.tokens)
        << type << (flash ? " flash" : "") << (tight ? " tight" : "");
    EXPECT_EQ(got.logprobs, alone.logprobs) << type;
    EXPECT_EQ(got.content, alone.content) << type;
    if (tight) {
      EXPECT_GT(engine.metrics().total.preemptions, 0) << type;
    }
    expect_clean(engine);
  }
}

class EngineFormatTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineFormatTest, SameTokensAloneBatchedCachedAndPreempted) {
  check_invariance(GetParam(), false, 7);
}

INSTANTIATE_TEST_SUITE_P(AllTypes, EngineFormatTest,
                         ::testing::Values("F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M",
                                           "Q3_K_M", "Q2_K", "Q5_1", "Q5_0", "Q4_1", "Q4_0"));

TEST(EngineTest, FlashOrderIsBatchInvariantToo) {
  check_invariance("Q4_K_M", true, 11);
  check_invariance("F16", true, 12);
}

TEST(EngineTest, PrefixReuseCountsAndChoicesShareThePrompt) {
  auto f = load("Q8_0");
  Engine engine(*f->model, f->tokenizer, config(1024));
  const auto p = prompt_tokens(f->tokenizer, 5);
  Stream::Choice first = run_one(engine, request(p, 10, 0, 0));
  EXPECT_EQ(first.stats.n_reused, 0);
  // A longer prompt that starts with the first one's prompt and output.
  auto p2 = p;
  p2.insert(p2.end(), first.tokens.begin(), first.tokens.begin() + 5);
  p2.push_back(17);
  Stream::Choice second = run_one(engine, request(p2, 4, 0, 0));
  EXPECT_EQ(second.stats.n_reused, static_cast<int32_t>(p.size()) + 5);
  const EngineMetrics m = engine.metrics();
  EXPECT_EQ(m.total.prompt_tokens, static_cast<int64_t>(p.size() + p2.size()));
  EXPECT_EQ(m.total.prompt_tokens_cached, static_cast<int64_t>(p.size()) + 5);

  // n = 3: each choice is what a single request with its seed would give.
  EngineRequest r = request(p2, 6, 0.9f, 100);
  r.n_choices = 3;
  Stream s;
  r.sink = s.sink();
  ASSERT_TRUE(engine.submit(r).has_value());
  s.wait(3);
  for (int32_t c = 0; c < 3; ++c) {
    Stream::Choice single = run_one(engine, request(p2, 6, 0.9f, 100 + static_cast<uint64_t>(c)));
    EXPECT_EQ(s.choices[c].tokens, single.tokens) << c;
    EXPECT_EQ(s.choices[c].stats.n_reused, static_cast<int32_t>(p2.size()) - 1) << c;
  }
  expect_clean(engine);
}

TEST(EngineTest, CancelDuringPrefillDecodeAndQueueFreesEverything) {
  auto f = load("Q8_0");
  // max_batch 2: a 1,500-token prompt takes 750 steps, so the cancel lands during its prefill.
  Engine engine(*f->model, f->tokenizer, config(2048, 1, 2));
  const std::vector<int32_t> long_prompt = long_prompt_of(f->tokenizer, 1500);
  Stream prefill, decode, queued;
  EngineRequest a = request(long_prompt, 50, 0, 0);
  a.sink = prefill.sink();
  auto ida = engine.submit(a);
  EngineRequest c = request(prompt_tokens(f->tokenizer, 2), 5, 0, 0);
  c.sink = queued.sink();
  auto idc = engine.submit(c);  // waits behind a (max_running 1)
  ASSERT_TRUE(ida.has_value() && idc.has_value());
  while (engine.metrics().total.prompt_rows == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  EXPECT_TRUE(engine.cancel(*idc));
  EXPECT_TRUE(engine.cancel(*ida));
  prefill.wait();
  queued.wait();
  EXPECT_EQ(prefill.choices[0].stats.finish_reason, "cancelled");
  EXPECT_TRUE(prefill.choices[0].tokens.empty());  // still in its prompt
  EXPECT_EQ(queued.choices[0].stats.finish_reason, "cancelled");
  EXPECT_FALSE(engine.cancel(*ida));  // already gone

  EngineRequest b = request(prompt_tokens(f->tokenizer, 4), 400, 0, 0);
  b.sink = decode.sink();
  auto idb = engine.submit(b);
  ASSERT_TRUE(idb.has_value());
  decode.wait_tokens(3);
  EXPECT_TRUE(engine.cancel(*idb));
  decode.wait();
  EXPECT_EQ(decode.choices[0].stats.finish_reason, "cancelled");
  EXPECT_LT(decode.choices[0].tokens.size(), 400u);
  expect_clean(engine);
  EXPECT_EQ(engine.metrics().total.requests_cancelled, 3);
}

TEST(EngineTest, AFullQueueSaysBusy) {
  auto f = load("Q8_0");
  EngineConfig c = config(2048, 1, 2);
  c.max_queue = 2;
  Engine engine(*f->model, f->tokenizer, c);
  const std::vector<int32_t> long_prompt = long_prompt_of(f->tokenizer, 1500);
  Stream a, b, d;
  EngineRequest ra = request(long_prompt, 5, 0, 0);
  ra.sink = a.sink();
  auto ida = engine.submit(ra);
  ASSERT_TRUE(ida.has_value());
  for (;;) {  // the gauges come out after the engine recounts what waits
    const EngineMetrics m = engine.metrics();
    if (m.sequences_running == 1 && m.requests_waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  // a runs (max_running 1); two more fill the queue; the next is refused at once.
  std::vector<uint64_t> queued;
  for (int i = 0; i < 2; ++i) {
    EngineRequest r = request(prompt_tokens(f->tokenizer, i), 3, 0, 0);
    r.sink = b.sink();
    auto id = engine.submit(r);
    ASSERT_TRUE(id.has_value()) << id.status().message();
    queued.push_back(*id);
  }
  EngineRequest rd = request(prompt_tokens(f->tokenizer, 9), 3, 0, 0);
  rd.sink = d.sink();
  auto busy = engine.submit(rd);
  ASSERT_FALSE(busy.has_value());
  EXPECT_NE(busy.status().message().find("busy"), std::string::npos) << busy.status().message();
  EXPECT_EQ(busy.status().kind(), StatusKind::kBusy);
  for (uint64_t id : queued) engine.cancel(id);
  engine.cancel(*ida);
  a.wait();
  b.wait(2);
  expect_clean(engine);
}

TEST(EngineTest, TheSecondR1TurnPrefillsOnlyTheNewUserMessage) {
  auto f = load("Q4_K_M");
  auto tmpl = text::ChatTemplate::for_model(f->file, "");
  ASSERT_TRUE(tmpl.has_value());
  ASSERT_EQ(tmpl->format(), text::ChatFormat::kDeepSeekR1);
  Engine engine(*f->model, f->tokenizer, config(2048));
  auto tokens_of = [&](const std::vector<text::ChatMessage>& m, bool gen) {
    return text::tokenize_chat(f->tokenizer, *tmpl->render(m, gen));
  };
  std::vector<text::ChatMessage> history{{"system", "You are terse."},
                                         {"user", "What is two plus two, and why?"}};
  EngineRequest r1 = request(tokens_of(history, true), 40, 0, 0);
  r1.starts_in_thinking = true;
  Stream::Choice turn1 = run_one(engine, r1);
  // The client sends back what it showed, thinking included; the template drops the thinking.
  history.push_back(
      {"assistant", "<think>\n" + turn1.reasoning + "</think>\n\n" + turn1.content + " Four."});
  // The engine warms the answer-only form of the turn while the user types.
  EngineRequest warm;
  warm.prompt = tokens_of(history, false);
  warm.prefill_only = true;
  Stream w;
  warm.sink = w.sink();
  ASSERT_TRUE(engine.submit(warm).has_value());
  w.wait();
  history.push_back({"user", "And three plus three?"});
  const auto turn2_prompt = tokens_of(history, true);
  ASSERT_GT(turn2_prompt.size(), warm.prompt.size());
  ASSERT_TRUE(std::equal(warm.prompt.begin(), warm.prompt.end(), turn2_prompt.begin()));
  EngineRequest r2 = request(turn2_prompt, 5, 0, 0);
  r2.starts_in_thinking = true;
  Stream::Choice turn2 = run_one(engine, r2);
  // Prefilled: "<｜User｜>And three plus three?<｜Assistant｜><think>\n" and nothing else.
  EXPECT_EQ(turn2.stats.n_reused, static_cast<int32_t>(warm.prompt.size()));
  EXPECT_EQ(turn2.stats.n_prompt - turn2.stats.n_reused,
            static_cast<int32_t>(turn2_prompt.size() - warm.prompt.size()));
  expect_clean(engine);
}

TEST(EngineTest, RefusesWhatCannotFitBeforeAnyWork) {
  auto f = load("Q8_0");
  Engine engine(*f->model, f->tokenizer, config(256));
  const auto p = prompt_tokens(f->tokenizer, 1);
  auto too_long = engine.submit(request(p, 256, 0, 0));
  ASSERT_FALSE(too_long.has_value());
  EXPECT_NE(too_long.status().message().find(
                fmt::format("({} in the prompt + 256 to generate)", p.size())),
            std::string::npos)
      << too_long.status().message();
  EXPECT_EQ(too_long.status().kind(), StatusKind::kTooLong);
  EXPECT_EQ(engine.submit(request({}, 5, 0, 0)).status().kind(), StatusKind::kInvalidInput);
  EXPECT_EQ(engine.submit(request({1 << 20}, 5, 0, 0)).status().kind(), StatusKind::kInvalidInput);
  EngineRequest bad = request(p, 5, 0, 0);
  bad.options.sampling.top_p = std::nanf("");
  EXPECT_FALSE(engine.submit(bad).has_value());
  // max_tokens 0: up to the context.
  Stream::Choice full = run_one(engine, request(p, 0, 0, 0));
  EXPECT_EQ(full.stats.n_gen + full.stats.n_prompt, 256);
  EXPECT_EQ(full.stats.finish_reason, "length");
  EXPECT_EQ(engine.metrics().total.requests_rejected, 4);
  expect_clean(engine);
}

// Progress while a prompt is processed in chunks: rising, ending at the prompt's length, and the
// same tokens as without it.
TEST(EngineTest, ProgressEventsFollowAChunkedPrompt) {
  auto f = load("Q8_0");
  Engine engine(*f->model, f->tokenizer,
                config(2048, 8, 64));  // 64 rows a step: 1,200 tokens in 19 steps
  const std::vector<int32_t> prompt = long_prompt_of(f->tokenizer, 1200);
  Stream::Choice a;
  {
    Engine other(*f->model, f->tokenizer,
                 config(2048, 8, 64));  // (a cache of its own: not a prefix hit)
    a = run_one(other, request(prompt, 4, 0, 0));
  }
  Stream s;
  EngineRequest r = request(prompt, 4, 0, 0);
  r.report_progress = true;
  r.sink = s.sink();
  ASSERT_TRUE(engine.submit(r).has_value());
  s.wait();
  ASSERT_GE(s.progress.size(), 2u);
  EXPECT_TRUE(std::is_sorted(s.progress.begin(), s.progress.end()));
  EXPECT_EQ(s.progress.back(), static_cast<int32_t>(prompt.size()));
  EXPECT_EQ(s.choices[0].tokens, a.tokens);
}

// R1's thinking cut short: by a reasoning budget (after exactly that many thinking tokens,
// "</think>" and a blank line follow and the model answers), or at once by end_thinking().
TEST(EngineTest, AReasoningBudgetAndEndThinkingForceTheAnswer) {
  auto f = load("Q8_0");
  Engine engine(*f->model, f->tokenizer, config(2048));
  const std::vector<int32_t> end_think = f->tokenizer.encode("</think>\n\n", true);
  ASSERT_EQ(end_think.size(), 2u);
  EngineRequest r = request(prompt_tokens(f->tokenizer, 3), 30, 0, 0);
  r.starts_in_thinking = true;
  r.options.stop_at_eog = false;
  r.options.reasoning_budget = 6;
  const Stream::Choice a = run_one(engine, r);
  ASSERT_EQ(a.tokens.size(), 30u);
  EXPECT_EQ(a.tokens[6], end_think[0]);
  EXPECT_EQ(a.tokens[7], end_think[1]);
  EXPECT_TRUE(a.stats.thinking_cut && !a.stats.thinking_cut_on_request);
  EXPECT_EQ(a.stats.n_reasoning, 7);  // six thoughts and the forced </think>
  EXPECT_EQ(a.reasoning.find("</think>"), std::string::npos);
  EXPECT_FALSE(a.content.empty());
  // The same request without a budget thinks longer (the tiny model rarely closes its thinking).
  EngineRequest free_r = r;
  free_r.options.reasoning_budget = -1;
  const Stream::Choice b = run_one(engine, free_r);
  EXPECT_FALSE(b.stats.thinking_cut);
  EXPECT_TRUE(
      std::equal(b.tokens.begin(), b.tokens.begin() + 6, a.tokens.begin()));  // same until the cut
  // end_thinking on a running request: the answer starts within a step or two.
  Stream s;
  EngineRequest long_r = request(prompt_tokens(f->tokenizer, 4), 400, 0, 0);
  long_r.starts_in_thinking = true;
  long_r.options.stop_at_eog = false;
  long_r.sink = s.sink();
  auto id = engine.submit(long_r);
  ASSERT_TRUE(id.has_value());
  s.wait_tokens(5);
  EXPECT_TRUE(engine.end_thinking(*id));
  s.wait();
  const Stream::Choice& c = s.choices[0];
  EXPECT_TRUE(c.stats.thinking_cut && c.stats.thinking_cut_on_request);
  const auto cut =
      std::search(c.tokens.begin(), c.tokens.end(), end_think.begin(), end_think.end());
  ASSERT_NE(cut, c.tokens.end());
  EXPECT_LT(cut - c.tokens.begin(), 200);
  EXPECT_FALSE(engine.end_thinking(*id));  // finished
  expect_clean(engine);
}

// --context-shift: a request asks for more tokens than the context holds; each time it fills, the
// kept start stays and half the rest goes. The result is deterministic (the same alone and beside
// another request) and everything is returned to the pool. Without the flag it is refused.
TEST(EngineTest, ContextShiftGoesPastTheContextTheSameAloneAndBatched) {
  auto f = load("Q8_0");
  EngineConfig c = config(512);
  c.max_context = 128;
  c.context_shift = true;
  c.n_keep = 8;
  Engine engine(*f->model, f->tokenizer, c);
  EngineRequest r = request(prompt_tokens(f->tokenizer, 1), 300, 0, 0);
  r.options.stop_at_eog = false;
  const Stream::Choice a = run_one(engine, r);
  EXPECT_EQ(a.stats.finish_reason, "length");
  EXPECT_EQ(a.stats.n_gen, 300);
  EXPECT_GE(a.stats.n_shifts, 3);
  // Beside another request (which shifts too), the same tokens and logprobs, bitwise.
  Stream s1, s2;
  EngineRequest r1 = r, r2 = request(prompt_tokens(f->tokenizer, 2), 250, 0.8f, 7);
  r2.options.stop_at_eog = false;
  r1.sink = s1.sink();
  r2.sink = s2.sink();
  ASSERT_TRUE(engine.submit(r1).has_value());
  ASSERT_TRUE(engine.submit(r2).has_value());
  s1.wait();
  s2.wait();
  EXPECT_EQ(s1.choices[0].tokens, a.tokens);
  EXPECT_EQ(s1.choices[0].logprobs, a.logprobs);
  EXPECT_EQ(s2.choices[0].stats.n_gen, 250);
  expect_clean(engine);
  // Off: the same request is refused before any work, with both counts.
  EngineConfig off = config(512);
  off.max_context = 128;
  Engine plain(*f->model, f->tokenizer, off);
  auto refused = plain.submit(r);
  ASSERT_FALSE(refused.has_value());
  EXPECT_NE(refused.status().message().find("context holds 128"), std::string::npos);
}

}  // namespace
}  // namespace ponder

namespace ponder {
namespace {

std::shared_ptr<grammar::Grammar> answer_grammar(int32_t leading_newlines) {
  grammar::CompileOptions o;
  o.leading_newlines = leading_newlines;
  auto g = grammar::Grammar::compile(
      "root ::= \"{\\\"n\\\": \" [0-9]{1,3} \", \\\"ok\\\": \" (\"true\" | \"false\") \", "
      "\\\"tag\\\": \\\"\" [a-z ]{0,12} \"\\\"}\"\n",
      o);
  EXPECT_TRUE(g.has_value()) << g.status().message();
  return *g;
}

// Constrained decoding: R1 thinks freely, then answers a sentence of the grammar (sampled at
// temperature 1 from random weights); an end of sequence while thinking becomes </think>; the
// same tokens alone and batched with free and constrained requests; max_tokens cutting the answer
// says "length".
TEST(EngineTest, ConstrainedAnswersFollowTheGrammarAloneAndBatched) {
  auto f = load("Q8_0");
  Engine engine(*f->model, f->tokenizer, config(8192));
  const auto g = answer_grammar(2);
  auto constrained = [&](int i, bool thinking) {
    EngineRequest r =
        request(prompt_tokens(f->tokenizer, i), 120, 1.0f, 100 + static_cast<uint64_t>(i));
    r.starts_in_thinking = thinking;
    r.options.stop_at_eog = true;
    r.options.reasoning_budget = thinking ? 4 + i % 5 : -1;
    r.options.grammar = thinking ? g : answer_grammar(0);
    return r;
  };
  std::vector<Stream::Choice> alone;
  for (int i = 0; i < 6; ++i) {
    const bool thinking = i % 3 != 2;
    const Stream::Choice c = run_one(engine, constrained(i, thinking));
    ASSERT_TRUE(c.error.empty()) << c.error;
    EXPECT_EQ(c.stats.finish_reason, "stop");
    EXPECT_TRUE(g->accepts(c.content)) << "'" << c.content << "'";
    EXPECT_EQ(c.content.find('{'), thinking ? c.content.find_first_not_of('\n') : 0u);
    if (thinking) {
      EXPECT_FALSE(c.reasoning.empty());
    }
    alone.push_back(c);
  }
  // Batched: the six again, beside free requests, all at once.
  std::vector<std::unique_ptr<Stream>> streams;
  for (int i = 0; i < 9; ++i) {
    auto s = std::make_unique<Stream>();
    EngineRequest r =
        i < 6 ? constrained(i, i % 3 != 2) : request(prompt_tokens(f->tokenizer, i), 40, 1.0f, 7);
    r.sink = s->sink();
    ASSERT_TRUE(engine.submit(std::move(r)).has_value());
    streams.push_back(std::move(s));
  }
  for (int i = 0; i < 6; ++i) {
    streams[static_cast<size_t>(i)]->wait();
    EXPECT_EQ(streams[static_cast<size_t>(i)]->choices[0].tokens,
              alone[static_cast<size_t>(i)].tokens)
        << i;
  }
  for (int i = 6; i < 9; ++i) streams[static_cast<size_t>(i)]->wait();

  // End of sequence made likely: while thinking it becomes </think>; in the answer it may come
  // only where the grammar can end.
  const std::vector<int32_t> end_think = f->tokenizer.encode("</think>\n\n", true);
  EngineRequest eos = constrained(1, true);
  eos.options.reasoning_budget = -1;
  for (int32_t t : f->tokenizer.eog_tokens()) eos.options.sampling.logit_bias.push_back({t, 30.0f});
  const Stream::Choice e = run_one(engine, eos);
  ASSERT_GE(e.tokens.size(), 2u);
  EXPECT_EQ(e.tokens[0], end_think[0]);
  EXPECT_EQ(e.tokens[1], end_think[1]);
  EXPECT_TRUE(g->accepts(e.content)) << e.content;
  EXPECT_EQ(e.stats.finish_reason, "stop");

  // Cut by max_tokens inside the answer: "length", and what came is a prefix of a sentence.
  EngineRequest cut = constrained(2, false);
  cut.options.max_tokens = 3;
  const Stream::Choice c = run_one(engine, cut);
  EXPECT_EQ(c.stats.finish_reason, "length");
  EXPECT_TRUE(g->accepts_prefix(c.content));
  EXPECT_FALSE(g->accepts(c.content));
  expect_clean(engine);
}

}  // namespace
}  // namespace ponder
