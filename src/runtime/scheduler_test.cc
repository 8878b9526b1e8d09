// The scheduler and the KV pool in a simulated mode: no model, the "forward pass" is the plan
// itself and the "sampled" token is a hash of the sequence so far, so a sequence's output depends
// only on its own tokens, as batch-invariant kernels guarantee for the real model.
#include "runtime/scheduler.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>
#include <random>

#include "runtime/fake_tier_for_test.h"

namespace ponder {
namespace {

int32_t next_token(const std::vector<int32_t>& tokens) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : tokens) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>(h % 50000);
}

struct Sim {
  explicit Sim(int32_t n_blocks, SchedulerConfig config = {}) : sched(config, n_blocks) {}

  uint64_t add(std::vector<int32_t> prompt, int32_t n_gen, uint64_t leader = 0, bool warm = false) {
    auto s = std::make_unique<Sequence>();
    s->id = next_id++;
    s->request = leader != 0 ? sched.find(leader)->request : s->id;
    s->leader = leader;
    s->n_prompt = static_cast<int32_t>(prompt.size());
    s->tokens = std::move(prompt);
    s->wants_logits = !warm;
    gen_left[s->id] = n_gen;
    return sched.add(std::move(s))->id;
  }

  // One step: (guess,) plan, "compute", sample for the rows that want logits, finish the done
  // ones; a sequence's guesses are kept while they are what it samples.
  StepPlan step(int32_t budget, int32_t tier_reads = INT32_MAX) {
    if (draft_rng != nullptr) {
      for (Sequence* s : sched.decoding_sequences()) {
        std::vector<int32_t> t = s->tokens;
        const int32_t n =
            std::min<int32_t>(static_cast<int32_t>((*draft_rng)() % 7), gen_left[s->id] - 1);
        for (int32_t i = 0; i < n; ++i) {
          t.push_back(next_token(t));
          const bool right = (*draft_rng)() % 10 < 7;
          s->draft.push_back(right ? t.back() : t.back() + 1);
        }
      }
    }
    StepPlan plan = sched.schedule(budget, tier_reads);
    for (const StepChunk& c : plan.chunks) {
      EXPECT_LE(static_cast<size_t>((c.end + kKvBlockSize - 1) / kKvBlockSize),
                c.seq->blocks.size());
    }
    std::vector<std::pair<Sequence*, int32_t>> sampled;  // (sequence, its guesses this step)
    for (const StepChunk& c : plan.chunks) {
      if (c.logits) sampled.push_back({c.seq, c.n_draft});
      n_draft_rows += c.n_draft;
    }
    for (uint64_t id : sched.complete(plan)) finished[id] = {};
    for (auto& [s, n_draft] : sampled) {
      const std::vector<int32_t> guesses = s->draft;
      for (int32_t i = 0;; ++i) {
        s->tokens.push_back(next_token(s->tokens));
        if (--gen_left[s->id] == 0) {
          finished[s->id] = std::vector<int32_t>(s->tokens.begin() + s->n_prompt, s->tokens.end());
          sched.remove(s->id);
          break;
        }
        if (i == n_draft || s->tokens.back() != guesses[static_cast<size_t>(i)]) {
          sched.end_draft(s);
          break;
        }
        sched.commit_guess(s);
        n_kept++;
      }
    }
    return plan;
  }

  void run(int32_t budget, int max_steps = 10000) {
    for (int i = 0; i < max_steps && !sched.idle(); ++i) step(budget);
    EXPECT_TRUE(sched.idle());
  }

  void expect_clean() {
    std::string why;
    EXPECT_TRUE(sched.pool().check(&why)) << why;
    EXPECT_EQ(sched.pool().n_used(), 0);
    for (int32_t b = 0; b < sched.pool().n_blocks(); ++b) EXPECT_EQ(sched.pool().ref_count(b), 0);
  }

  Scheduler sched;
  std::mt19937* draft_rng = nullptr;  // set: decoding sequences guess (7 in 10 right)
  int64_t n_draft_rows = 0, n_kept = 0;
  uint64_t next_id = 1;
  std::map<uint64_t, int32_t> gen_left;
  std::map<uint64_t, std::vector<int32_t>> finished;  // generated tokens
};

std::vector<int32_t> prompt_of(int32_t n, int32_t salt) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), salt * 1000);
  return p;
}

// What a sequence generates alone, with room to spare.
std::vector<int32_t> alone(const std::vector<int32_t>& prompt, int32_t n_gen) {
  Sim sim(64);
  const uint64_t id = sim.add(prompt, n_gen);
  sim.run(512);
  return sim.finished[id];
}

TEST(SchedulerTest, LongPromptsAreChunkedAndDecodeRowsComeFirst) {
  Sim sim(64);
  const uint64_t a = sim.add(prompt_of(10, 1), 50);
  const uint64_t b = sim.add(prompt_of(10, 2), 50);
  StepPlan p = sim.step(64);
  EXPECT_EQ(p.n_rows, 20);  // both prompts in one step
  EXPECT_EQ(p.n_decode, 0);
  const uint64_t c = sim.add(prompt_of(100, 3), 5);
  std::vector<int32_t> chunk_sizes;
  for (int i = 0; i < 4; ++i) {
    p = sim.step(30);
    ASSERT_EQ(p.chunks.size(), 3u);
    EXPECT_EQ(p.n_decode, 2);  // a and b decode every step
    EXPECT_EQ(p.chunks[0].seq->id, a);
    EXPECT_EQ(p.chunks[1].seq->id, b);
    EXPECT_EQ(p.chunks[2].seq->id, c);
    chunk_sizes.push_back(p.chunks[2].end - p.chunks[2].begin);
    EXPECT_EQ(p.chunks[2].logits, p.chunks[2].end == 100);
  }
  p = sim.step(30);
  EXPECT_EQ(p.n_decode, 3);  // c's prompt is done: it decodes beside a and b
  EXPECT_EQ(chunk_sizes, (std::vector<int32_t>{30, 30, 30, 10}));
  sim.run(30);
  EXPECT_EQ(sim.finished[c], alone(prompt_of(100, 3), 5));
  sim.expect_clean();
}

TEST(SchedulerTest, BatchLimitAndRunningLimitAreKept) {
  Sim sim(256, SchedulerConfig{.max_running = 3, .max_batch = 8});
  for (int i = 0; i < 5; ++i) sim.add(prompt_of(6, i), 4);
  StepPlan p = sim.step(100);
  EXPECT_EQ(p.n_rows, 8);  // 6 + 2 of the second prompt
  EXPECT_EQ(sim.sched.n_running(), 2);
  for (int i = 0; i < 20 && !sim.sched.idle(); ++i) {
    p = sim.step(100);
    EXPECT_LE(p.n_rows, 8);
    EXPECT_LE(sim.sched.n_running(), 3);
  }
  sim.run(100);
  EXPECT_EQ(sim.finished.size(), 5u);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(sim.finished[static_cast<uint64_t>(i + 1)], alone(prompt_of(6, i), 4));
  sim.expect_clean();
}

TEST(SchedulerTest, ASecondRequestTakesTheCachedPrefixExceptItsLastToken) {
  Sim sim(64);
  auto prompt = prompt_of(40, 7);
  const uint64_t a = sim.add(prompt, 3);
  sim.run(512);
  const uint64_t b = sim.add(prompt, 3);
  StepPlan p = sim.sched.schedule(512);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].begin, 39);  // only the last prompt token is recomputed
  EXPECT_EQ(p.chunks[0].seq->n_cached, 39);
  ASSERT_EQ(p.copies.size(), 1u);  // the partial third block, copied
  EXPECT_EQ(p.copies[0].n_slots, 7);
  sim.sched.complete(p);
  p.chunks[0].seq->tokens.push_back(next_token(p.chunks[0].seq->tokens));
  sim.gen_left[b]--;
  sim.run(512);
  EXPECT_EQ(sim.finished[a], sim.finished[b]);
  sim.expect_clean();
}

TEST(SchedulerTest, OtherChoicesWaitForTheLeadersPromptThenShareIt) {
  Sim sim(64);
  const uint64_t lead = sim.add(prompt_of(50, 3), 4);
  const uint64_t f1 = sim.add(prompt_of(50, 3), 4, lead);
  const uint64_t f2 = sim.add(prompt_of(50, 3), 4, lead);
  StepPlan p = sim.step(20);  // the leader's first chunk only
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq->id, lead);
  sim.step(20);
  p = sim.step(20);  // the leader's last 10
  EXPECT_EQ(p.chunks.size(), 1u);
  p = sim.step(20);  // leader decodes; followers recompute only the last prompt token
  ASSERT_EQ(p.chunks.size(), 3u);
  EXPECT_EQ(p.chunks[1].seq->id, f1);
  EXPECT_EQ(p.chunks[1].begin, 49);
  EXPECT_EQ(p.chunks[2].seq->id, f2);
  EXPECT_EQ(p.copies.size(), 2u);
  sim.run(20);
  EXPECT_EQ(sim.finished[f1], sim.finished[lead]);
  EXPECT_EQ(sim.finished[f2], sim.finished[lead]);
  sim.expect_clean();
}

TEST(SchedulerTest, AFullPoolPreemptsTheNewestWhichResumesWithTheSameTokens) {
  // 6 blocks = 96 positions; three sequences that each grow to 60 cannot all fit.
  Sim sim(6);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) ids.push_back(sim.add(prompt_of(20, i), 40));
  int preemptions = 0;
  for (int i = 0; i < 2000 && !sim.sched.idle(); ++i)
    preemptions += static_cast<int>(sim.step(64).preempted.size());
  EXPECT_TRUE(sim.sched.idle());
  EXPECT_GT(preemptions, 0);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(sim.finished[ids[static_cast<size_t>(i)]], alone(prompt_of(20, i), 40));
  sim.expect_clean();
}

TEST(SchedulerTest, RemovingAtEveryStageReturnsEveryBlock) {
  for (int stage = 0; stage < 4; ++stage) {
    Sim sim(10);  // 160 positions: keep (50) and gone (120) cannot both finish at once
    const uint64_t keep = sim.add(prompt_of(30, 1), 20);
    const uint64_t gone = sim.add(prompt_of(100, 2), 20);
    if (stage >= 1) sim.step(40);  // gone: admitted, first chunk of its prompt
    if (stage >= 2) {
      for (int i = 0; i < 4; ++i) sim.step(40);  // gone: decoding
    }
    if (stage >= 3) {
      // Fill the pool until gone (the newest) is preempted back into the queue.
      sim.add(prompt_of(5, 9), 1);
      while (sim.sched.find(gone) != nullptr && sim.sched.find(gone)->running) sim.step(40);
    }
    EXPECT_TRUE(sim.sched.remove(gone));
    EXPECT_FALSE(sim.sched.remove(gone));
    sim.run(40);
    EXPECT_EQ(sim.finished[keep], alone(prompt_of(30, 1), 20)) << "stage " << stage;
    sim.expect_clean();
  }
}

TEST(SchedulerTest, PrefillOnlySequencesWarmTheCache) {
  Sim sim(32);
  auto history = prompt_of(45, 4);
  sim.add(history, 0, 0, /*warm=*/true);
  sim.run(512);
  EXPECT_EQ(sim.sched.pool().n_used(), 0);
  auto next_turn = history;
  for (int i = 0; i < 10; ++i) next_turn.push_back(9000 + i);
  const uint64_t t = sim.add(next_turn, 2);
  StepPlan p = sim.sched.schedule(512);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq->id, t);
  EXPECT_EQ(p.chunks[0].begin, 45);  // only the new tokens
  sim.sched.remove(t);
  sim.expect_clean();
}

// A random workload: arrivals sharing system prompts (prefixes collide on purpose), cancels,
// random prompt budgets; the pool's books checked every step; then every output must be what the
// sequence generates alone, and no block may be left in use.
struct Workload {
  int steps, max_asked, n_prefixes, max_tail, max_gen, cancel_every, max_budget;
};

void run_random(Sim& sim, std::mt19937& rng, const Workload& w) {
  std::map<uint64_t, std::pair<std::vector<int32_t>, int32_t>> asked;
  for (int step = 0; step < w.steps; ++step) {
    if (rng() % 4 == 0 && static_cast<int>(asked.size()) < w.max_asked) {
      auto p = prompt_of(static_cast<int32_t>(rng() % static_cast<uint32_t>(w.n_prefixes)) * 16 + 4,
                         w.n_prefixes);
      for (uint32_t i = 0, n = rng() % static_cast<uint32_t>(w.max_tail) + 1; i < n; ++i)
        p.push_back(static_cast<int32_t>(rng() % 100));
      const int32_t n_gen = static_cast<int32_t>(rng() % static_cast<uint32_t>(w.max_gen)) + 1;
      asked[sim.add(p, n_gen)] = {p, n_gen};
    }
    if (rng() % static_cast<uint32_t>(w.cancel_every) == 0 && !asked.empty()) {
      auto it = asked.begin();
      std::advance(it, rng() % asked.size());
      if (sim.sched.remove(it->first)) asked.erase(it);
    }
    sim.step(static_cast<int32_t>(rng() % static_cast<uint32_t>(w.max_budget)) + 1);
    std::string why;
    ASSERT_TRUE(sim.sched.pool().check(&why)) << why;
  }
  sim.run(32);
  for (auto& [id, ask] : asked) {
    ASSERT_TRUE(sim.finished.count(id)) << id;
    EXPECT_EQ(sim.finished[id], alone(ask.first, ask.second));
  }
  sim.expect_clean();
}

TEST(SchedulerTest, RandomArrivalsCancellationsAndBudgetsLoseNoBlock) {
  std::mt19937 rng(1234);
  Sim sim(24, SchedulerConfig{.max_running = 6, .max_batch = 48});
  run_random(sim, rng, Workload{1500, 200, 3, 60, 30, 10, 40});
}

// Guesses never take a decoding sequence's own row: with 4 rows a step and 4 streams guessing 4
// tokens each, every stream still gets its row (and no guess fits).
TEST(SchedulerTest, GuessesLeaveEveryStreamItsRow) {
  Sim sim(64, SchedulerConfig{.max_running = 4, .max_batch = 4});
  for (int32_t i = 0; i < 4; ++i) sim.add(prompt_of(3, i + 1), 50);
  for (int i = 0; i < 10 && sim.sched.n_decoding() < 4; ++i) sim.step(4);
  ASSERT_EQ(sim.sched.n_decoding(), 4);
  for (Sequence* s : sim.sched.decoding_sequences()) s->draft = {1, 2, 3, 4};
  const StepPlan plan = sim.sched.schedule(4);
  EXPECT_EQ(plan.chunks.size(), 4u);
  EXPECT_EQ(plan.n_draft, 0);
  EXPECT_EQ(plan.n_rows, 4);
}

// Speculative decoding's rows: guesses planned beside prompts and preemptions, the right ones
// kept, the rest rolled back: the same outputs, no block lost, and the pool's books agree.
TEST(SchedulerTest, GuessesKeptOrRolledBackLoseNoBlock) {
  std::mt19937 rng(99);
  Sim sim(20, SchedulerConfig{.max_running = 5, .max_batch = 24});
  sim.draft_rng = &rng;
  run_random(sim, rng, Workload{800, 120, 2, 40, 40, 15, 30});
  EXPECT_GT(sim.n_draft_rows, 500);
  EXPECT_GT(sim.n_kept, 200);
  EXPECT_LT(sim.n_kept, sim.n_draft_rows);
}

TEST(SchedulerTest, BlocksTheTierStillCopiesAreWaitedForNotPreemptedFor) {
  Sim sim(8);
  FakeTier tier;
  tier.defer_copies = true;
  sim.sched.set_block_tier(&tier);
  const uint64_t first = sim.add(prompt_of(83, 1), 5);
  sim.run(512);
  ASSERT_EQ(tier.uncopied.size(), 5u);  // its 5 full blocks, referenced until copied
  EXPECT_EQ(sim.sched.pool().n_available(), 3);
  // Three blocks for a 40-token prompt; its fourth block, mid-decode, needs the copied ones.
  const uint64_t next = sim.add(prompt_of(40, 2), 20);
  sim.step(512);
  EXPECT_EQ(tier.waits, 0);
  EXPECT_EQ(sim.sched.pool().n_tier_held(), 5) << "not copied yet: still held";
  uint64_t preempted = 0;
  for (int i = 0; i < 30 && !sim.sched.idle(); ++i) {
    const StepPlan plan = sim.step(512);
    preempted += plan.preempted.size();
  }
  EXPECT_TRUE(sim.sched.idle());
  EXPECT_EQ(tier.waits, 1) << "waited once, when the pool ran out";
  EXPECT_EQ(preempted, 0u);
  EXPECT_EQ(sim.finished[next], alone(prompt_of(40, 2), 20));
  EXPECT_EQ(sim.finished[first], alone(prompt_of(83, 1), 5));
  // Its own blocks are held in turn; back at the next step, once copied.
  tier.finish_copies();
  sim.sched.schedule(512);
  EXPECT_EQ(sim.sched.pool().n_tier_held(), 0);
  sim.expect_clean();
}

}  // namespace
}  // namespace ponder

namespace ponder {
namespace {

// A decoding sequence whose context is full: the kept start stays, half the rest goes (whole
// blocks), its positions close up, and the moved part never becomes findable.
TEST(SchedulerTest, ContextShiftKeepsTheStartAndDropsHalfTheRest) {
  Sim sim(32);
  const std::vector<int32_t> prompt = prompt_of(100, 3);
  const uint64_t id = sim.add(prompt, 1000);
  for (int i = 0; i < 40; ++i) sim.step(512);  // 100 prompt + 40 generated
  Sequence* s = sim.sched.find(id);
  ASSERT_TRUE(s != nullptr && s->decoding());
  const std::vector<int32_t> tokens = s->tokens;
  const int32_t n = s->n_computed;  // 139 (the 140th token is pending)
  ContextShift cs;
  ASSERT_TRUE(sim.sched.shift_context(s, 20, &cs));
  EXPECT_EQ(cs.n_kept, 32);                         // 20 rounded up to whole blocks
  EXPECT_EQ(cs.n_dropped, (n - 32) / 2 / 16 * 16);  // half the rest, whole blocks
  EXPECT_EQ(cs.delta, -cs.n_dropped);
  EXPECT_EQ(s->n_computed, n - cs.n_dropped);
  EXPECT_EQ(s->tokens.size(), tokens.size() - static_cast<size_t>(cs.n_dropped));
  EXPECT_TRUE(std::equal(s->tokens.begin(), s->tokens.begin() + 32, tokens.begin()));
  EXPECT_TRUE(
      std::equal(s->tokens.begin() + 32, s->tokens.end(), tokens.begin() + 32 + cs.n_dropped));
  EXPECT_EQ(cs.blocks.size(), s->blocks.size() - 2);  // every block after the kept two moves
  EXPECT_EQ(s->findable_end, 32);
  std::string why;
  EXPECT_TRUE(sim.sched.pool().check(&why)) << why;
  sim.step(512);  // decoding goes on at the closed-up positions
  EXPECT_EQ(s->n_computed, n - cs.n_dropped + 1);
  // Too little to drop: refused (the engine then ends the request "context").
  ContextShift none;
  EXPECT_FALSE(sim.sched.shift_context(s, 1 << 20, &none));
  sim.sched.remove(id);
  sim.expect_clean();
  // The kept start and the dropped blocks (computed at their true positions) stay in the cache;
  // the moved, re-rotated part is not: the old tokens are found up to the end of the dropped part.
  EXPECT_EQ(sim.sched.pool().find_prefix(tokens, static_cast<int32_t>(tokens.size())).n_tokens(),
            cs.n_kept + cs.n_dropped);
}

// A prefix on the block tier (the disk) is read a few blocks a step while a stream decodes: the
// stream keeps its row every step, the new sequence waits until its whole prefix is read, then
// computes only the rest and generates what it would alone; one removed while it waits for its
// reads gives back every block.
TEST(SchedulerTest, TierReadsSpreadOverStepsWhileStreamsDecode) {
  for (const bool cancel : {false, true}) {
    Sim sim(32);
    FakeTier tier;
    sim.sched.set_block_tier(&tier);
    const uint64_t first = sim.add(prompt_of(83, 1), 5);
    sim.run(512);
    ASSERT_EQ(tier.held.size(), 5u);  // 88 positions: 5 full blocks
    sim.sched.pool().clear_cache();   // as after a restart
    std::vector<int32_t> turn2 = prompt_of(83, 1);
    turn2.insert(turn2.end(), sim.finished[first].begin(), sim.finished[first].end());
    for (int32_t i = 0; i < 10; ++i) turn2.push_back(7000 + i);

    const uint64_t stream = sim.add(prompt_of(20, 2), 30);
    sim.step(512);
    ASSERT_TRUE(sim.sched.find(stream)->decoding());
    const uint64_t next = sim.add(turn2, 6);
    for (size_t reads : {2u, 4u}) {
      const StepPlan plan = sim.step(512, 2);
      EXPECT_EQ(plan.n_decode, 1) << "the stream decodes beside the reads";
      EXPECT_EQ(tier.reads.size(), reads);
      EXPECT_FALSE(sim.sched.find(next)->running) << "it waits for the rest of its prefix";
    }
    if (cancel) {
      EXPECT_TRUE(sim.sched.remove(next));
      sim.run(512);
      EXPECT_EQ(tier.reads.size(), 4u);
      sim.expect_clean();
      continue;
    }
    const StepPlan plan = sim.step(512, 2);
    EXPECT_EQ(tier.reads.size(), 5u);
    ASSERT_EQ(plan.chunks.size(), 2u);
    EXPECT_EQ(plan.chunks[1].seq->id, next);
    EXPECT_EQ(plan.chunks[1].begin, 5 * kKvBlockSize) << "the prefix from the tier";
    EXPECT_EQ(sim.sched.find(next)->n_cached, 5 * kKvBlockSize);
    sim.run(512);
    EXPECT_EQ(sim.finished[next], alone(turn2, 6));
    EXPECT_EQ(sim.finished[stream], alone(prompt_of(20, 2), 30));
    sim.expect_clean();
  }
}

}  // namespace
}  // namespace ponder
