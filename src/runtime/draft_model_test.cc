#include "runtime/draft_model.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "runtime/tiny_model_for_test.h"

namespace ponder {
namespace testing_support {
long allocation_count();  // alloc_counter_for_test.cc
}  // namespace testing_support
namespace {

// The draft model's own greedy continuation of `tokens`, up to k tokens (stopping after an
// end-of-generation token), on a fresh cache with one sequence: the reference the batched,
// rolled-back, evicted proposals must equal bit for bit.
std::vector<int32_t> plain_greedy(Qwen2Model& model, const text::Tokenizer& tok,
                                  const DraftModel& draft, std::vector<int32_t> tokens, int k,
                                  ThreadPool& pool) {
  const int64_t n_blocks = (static_cast<int64_t>(tokens.size()) + k) / kKvBlockSize + 1;
  KvCache cache = model.make_cache(n_blocks, kKvBlockSize);
  std::vector<int32_t> table(static_cast<size_t>(n_blocks));
  std::iota(table.begin(), table.end(), 0);
  const int64_t n_vocab = model.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<int32_t> out;
  size_t fed = 0;
  while (static_cast<int>(out.size()) < k) {
    Batch batch;
    batch.block_tables.push_back(table);
    for (size_t p = fed; p < tokens.size(); ++p) {
      batch.rows.push_back({tokens[p], static_cast<int32_t>(p), 0, p + 1 == tokens.size()});
    }
    fed = tokens.size();
    EXPECT_TRUE(model.forward(batch, cache, logits.data(), pool).is_ok());
    int32_t best = -1;
    for (int32_t id = 0; id < n_vocab; ++id) {
      if (!draft.is_proposable(id)) continue;
      if (best < 0 || logits[static_cast<size_t>(id)] > logits[static_cast<size_t>(best)]) {
        best = id;
      }
    }
    out.push_back(best);
    tokens.push_back(best);
    if (tok.is_eog(best)) break;
  }
  return out;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

struct Fixture {
  std::unique_ptr<TinyModel> tiny = load_tiny_model("Q8_0");
  ThreadPool pool{2};

  std::unique_ptr<DraftModel> make(const DraftModelOptions& options) {
    auto d = DraftModel::create(*tiny->model, tiny->tokenizer, tiny->tokenizer,
                                tiny->model->config().n_vocab, options);
    EXPECT_TRUE(d.has_value()) << d.status().message();
    return std::move(*d);
  }
  std::vector<int32_t> encode(const std::string& text) {
    return tiny->tokenizer.encode(text, false);
  }
  std::vector<int32_t> greedy(const DraftModel& d, const std::vector<int32_t>& tokens, int k) {
    return plain_greedy(*tiny->model, tiny->tokenizer, d, tokens, k, pool);
  }
};

// Proposes for every (seq, tokens, k) together; returns the drafts in order.
std::vector<std::vector<int32_t>> propose(DraftModel& d, ThreadPool& pool,
                                          const std::vector<uint64_t>& seqs,
                                          const std::vector<std::vector<int32_t>>& tokens,
                                          const std::vector<int>& k) {
  std::vector<std::vector<int32_t>> drafts(seqs.size());
  std::vector<DraftAsk> asks(seqs.size());
  for (size_t i = 0; i < seqs.size(); ++i) {
    asks[i] = DraftAsk{seqs[i], tokens[i], k[i], &drafts[i]};
  }
  d.propose(asks, pool);
  return drafts;
}

TEST(DraftModelTest, BatchedProposalsAreThePlainGreedyContinuation) {
  Fixture f;
  std::string long_text;
  for (int i = 0; i < 40; ++i) long_text += "Sentence " + std::to_string(i) + " of a long prompt. ";
  const std::vector<std::vector<int32_t>> prompts = {
      f.encode("The quick brown fox jumps over the lazy dog."),
      f.encode("Hello"),
      f.encode(long_text),
  };
  ASSERT_GT(prompts[2].size(), 300u);
  const std::vector<int> k = {4, 8, 6};
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < prompts.size(); ++i) {
    DraftModelOptions o;
    o.kv_positions = 2048;
    expected.push_back(f.greedy(*f.make(o), prompts[i], k[i]));
    EXPECT_FALSE(expected.back().empty());
  }
  // Rows enough for everything in one call, and 7 rows a call: the long prompt is caught up over
  // many calls (in passes shared with the other sequences, which draft at every call) and drafts
  // once it is.
  for (int32_t max_rows : {512, 7}) {
    DraftModelOptions o;
    o.kv_positions = 2048;
    o.max_rows = max_rows;
    auto d = f.make(o);
    // The long prompt drafts at the first call whose catch-up finishes it: 7 rows a call until
    // the rest is short enough to always run (two blocks).
    const int n = static_cast<int>(prompts[2].size());
    const int calls = max_rows == 512 ? 1 : (n - 2 * kKvBlockSize + 6) / 7 + 1;
    for (int call = 1; call <= calls; ++call) {
      const auto drafts = propose(*d, f.pool, {10, 11, 12}, prompts, k);
      EXPECT_EQ(drafts[0], expected[0]) << "rows " << max_rows << " call " << call;
      EXPECT_EQ(drafts[1], expected[1]) << "rows " << max_rows << " call " << call;
      if (call < calls) {
        EXPECT_TRUE(drafts[2].empty()) << "call " << call;
      } else {
        EXPECT_EQ(drafts[2], expected[2]) << "rows " << max_rows << " call " << call;
      }
    }
    EXPECT_GT(d->seconds_per_token(), 0);
    std::string why;
    EXPECT_TRUE(d->kv_pool().check(&why)) << why;
  }
}

// One draft model serving two targets (ponder serve -m A -m B --draft D): two DraftModels on one
// Qwen2Model, each called from its own engine thread with its own pool, their forward passes
// taking turns by the shared lock. Each gives the plain greedy continuation every time.
TEST(DraftModelTest, OneModelDraftsForTwoTargetsOnTwoThreads) {
  Fixture f;
  const std::vector<int32_t> a = f.encode("The quick brown fox jumps over the lazy dog.");
  const std::vector<int32_t> b = f.encode("Counting: one, two, three, four, five,");
  DraftModelOptions o;
  o.kv_positions = 1024;
  o.forward_lock = std::make_shared<std::mutex>();
  auto da = f.make(o);
  auto db = f.make(o);
  const std::vector<int32_t> want_a = f.greedy(*da, a, 6);
  const std::vector<int32_t> want_b = f.greedy(*db, b, 6);
  auto run = [](DraftModel& d, const std::vector<int32_t>& prompt, const std::vector<int32_t>& want,
                int* mismatches) {
    ThreadPool pool(1);
    for (int i = 0; i < 30; ++i) {
      // A new sequence each time: a fresh catch-up and draft, the previous one forgotten.
      const uint64_t seq = static_cast<uint64_t>(i);
      if (propose(d, pool, {seq}, {prompt}, {6})[0] != want) ++*mismatches;
      d.forget(seq);
    }
  };
  int bad_a = 0, bad_b = 0;
  std::thread ta(run, std::ref(*da), std::cref(a), std::cref(want_a), &bad_a);
  std::thread tb(run, std::ref(*db), std::cref(b), std::cref(want_b), &bad_b);
  ta.join();
  tb.join();
  EXPECT_EQ(bad_a, 0);
  EXPECT_EQ(bad_b, 0);
  std::string why;
  EXPECT_TRUE(da->kv_pool().check(&why)) << why;
  EXPECT_TRUE(db->kv_pool().check(&why)) << why;
}

TEST(DraftModelTest, RollbackAfterRejectionGivesThePlainGreedyContinuation) {
  Fixture f;
  DraftModelOptions o;
  o.kv_positions = 1024;
  auto d = f.make(o);
  std::vector<std::vector<int32_t>> tokens = {
      f.encode("Once upon a time, in a land far away, there lived"),
      f.encode("1, 2, 3, 4, 5,"),
  };
  const int k = 6;
  auto drafts = propose(*d, f.pool, {1, 2}, tokens, {k, k});
  // Rounds of verification as the engine does it: the target keeps j of the guesses then samples
  // its own token (here: one the draft did not guess), or keeps all and adds a bonus token.
  const int accepted[][2] = {{0, 2}, {3, 6}, {1, 0}, {6, 5}, {2, 2}};
  for (const auto& round : accepted) {
    for (size_t s = 0; s < 2; ++s) {
      const std::vector<int32_t>& guess = drafts[s];
      ASSERT_FALSE(guess.empty());
      const size_t j = std::min<size_t>(static_cast<size_t>(round[s]), guess.size());
      tokens[s].insert(tokens[s].end(), guess.begin(), guess.begin() + static_cast<long>(j));
      const int32_t own = j < guess.size() ? (guess[j] + 17) % 8000 : 42;  // rejected / bonus
      tokens[s].push_back(own);
    }
    drafts = propose(*d, f.pool, {1, 2}, tokens, {k, k});
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_EQ(drafts[s], f.greedy(*d, tokens[s], k)) << "sequence " << s;
    }
  }
  // Tokens edited in the middle (an earlier turn rewritten): rolled back that far.
  tokens[0][5] = (tokens[0][5] + 1) % 8000;
  drafts = propose(*d, f.pool, {1}, {tokens[0]}, {k});
  EXPECT_EQ(drafts[0], f.greedy(*d, tokens[0], k));
  // Asked again with unchanged tokens: the same draft.
  const auto again = propose(*d, f.pool, {1}, {tokens[0]}, {k});
  EXPECT_EQ(again[0], drafts[0]);
  std::string why;
  EXPECT_TRUE(d->kv_pool().check(&why)) << why;
}

// The hot loop reuses its buffers: what a call allocates (the pool's prefix lookup, per sequence)
// does not grow with the tokens drafted.
TEST(DraftModelTest, AllocationsDoNotGrowWithTheDraftLength) {
  Fixture f;
  DraftModelOptions o;
  o.kv_positions = 1024;
  auto d = f.make(o);
  std::vector<std::vector<int32_t>> tokens = {f.encode("One two three four five"),
                                              f.encode("Alpha beta gamma delta")};
  auto round = [&](int k) {
    auto drafts = propose(*d, f.pool, {1, 2}, tokens, {k, k});
    for (size_t s = 0; s < 2; ++s) {  // one guess kept, then a token of the target's own
      tokens[s].push_back(drafts[s][0]);
      tokens[s].push_back(7);
    }
    const long before = testing_support::allocation_count();
    drafts = propose(*d, f.pool, {1, 2}, tokens, {k, k});
    const long n = testing_support::allocation_count() - before;
    EXPECT_EQ(static_cast<int>(drafts[0].size()), k);
    tokens[0].push_back(3);
    tokens[1].push_back(3);
    return n;
  };
  round(8);  // buffers grown
  const long short_draft = round(2);
  const long long_draft = round(8);
  // The forward pass itself allocates a little (its thread pool's task objects): measured alone,
  // on a two-row decode pass like the draft's.
  KvCache cache = f.tiny->model->make_cache(4, kKvBlockSize);
  const std::vector<int32_t> table0 = {0, 1}, table1 = {2, 3};
  Batch batch;
  batch.block_tables = {table0, table1};
  batch.rows = {{5, 0, 0, true}, {6, 0, 1, true}};
  std::vector<float> logits(2 * static_cast<size_t>(f.tiny->model->config().n_vocab));
  ASSERT_TRUE(f.tiny->model->forward(batch, cache, logits.data(), f.pool).is_ok());
  batch.rows = {{7, 1, 0, true}, {8, 1, 1, true}};
  const long before = testing_support::allocation_count();
  ASSERT_TRUE(f.tiny->model->forward(batch, cache, logits.data(), f.pool).is_ok());
  const long per_pass = testing_support::allocation_count() - before;
  // Six passes more; beyond them only the test's own draft vectors growing and the pool's
  // index entries of the blocks filled (one per block, not per token).
  EXPECT_LE(long_draft - short_draft, 6 * per_pass + 16)
      << short_draft << " allocations for 2 tokens, " << long_draft << " for 8, " << per_pass
      << " per forward pass";
}

TEST(DraftModelTest, ForgetFreesBlocksAndEvictionKeepsItWithinThePool) {
  Fixture f;
  DraftModelOptions o;
  o.kv_positions = 256;  // 16 blocks: three of these sequences at once, four blocks each
  o.max_seqs = 6;        // beyond this, or the room, the least recently asked are evicted
  auto d = f.make(o);
  std::vector<std::vector<int32_t>> tokens;
  for (int i = 0; i < 9; ++i) {
    tokens.push_back(f.encode("Sequence number " + std::to_string(i) +
                              " has its own words, which differ from every other one here, and "
                              "it goes on for a while, so that it fills more than two blocks of "
                              "the cache, maybe three."));
    ASSERT_GT(tokens.back().size(), 32u);
    ASSERT_LT(tokens.back().size(), 55u);
  }
  // Rounds over groups of three sequences, nine in all: the pool holds about three.
  for (int round = 0; round < 3; ++round) {
    for (int g = 0; g < 3; ++g) {
      std::vector<uint64_t> seqs;
      std::vector<std::vector<int32_t>> toks;
      for (int i = 3 * g; i < 3 * g + 3; ++i) {
        seqs.push_back(static_cast<uint64_t>(i));
        toks.push_back(tokens[static_cast<size_t>(i)]);
      }
      const auto drafts = propose(*d, f.pool, seqs, toks, {5, 5, 5});
      for (size_t i = 0; i < seqs.size(); ++i) {
        EXPECT_EQ(drafts[i], f.greedy(*d, toks[i], 5)) << "round " << round << " seq " << seqs[i];
        auto& t = tokens[static_cast<size_t>(seqs[i])];
        t.push_back(drafts[i].empty() ? 7 : drafts[i][0]);  // one accepted guess per round
      }
      EXPECT_LE(d->n_seqs(), 6);
      std::string why;
      EXPECT_TRUE(d->kv_pool().check(&why)) << why;
    }
  }
  EXPECT_GT(d->n_evictions(), 0);
  for (uint64_t s = 0; s < 9; ++s) d->forget(s);
  EXPECT_EQ(d->n_seqs(), 0);
  EXPECT_EQ(d->kv_pool().n_used(), 0);
  d->forget(12345);  // unknown: nothing happens

  // A sequence longer than the pool gets no draft (and breaks nothing); a short one still does.
  std::vector<int32_t> huge;
  while (huge.size() < 300) huge = concat(huge, tokens[0]);
  const auto drafts = propose(*d, f.pool, {50, 51}, {huge, tokens[1]}, {4, 4});
  EXPECT_TRUE(drafts[0].empty());
  EXPECT_EQ(drafts[1], f.greedy(*d, tokens[1], 4));
  // A sequence past the draft model's context (4096 positions) gets none, nor does one holding an
  // id the draft cannot embed.
  std::vector<int32_t> past_ctx(4096, 100);
  std::vector<int32_t> unknown = tokens[2];
  unknown.push_back(static_cast<int32_t>(f.tiny->model->config().n_vocab) + 5);
  const auto none = propose(*d, f.pool, {52, 53}, {past_ctx, unknown}, {4, 4});
  EXPECT_TRUE(none[0].empty());
  EXPECT_TRUE(none[1].empty());
  std::string why;
  EXPECT_TRUE(d->kv_pool().check(&why)) << why;
}

TEST(DraftModelTest, RefusesAnotherTokenizerAndNeverProposesPadding) {
  Fixture f;
  auto r1_file = GgufFile::open(std::string(PONDER_SHARED_DIR) + "/models/vocab-r1-qwen.gguf");
  ASSERT_TRUE(r1_file.has_value());
  auto r1 = text::Tokenizer::from_gguf(*r1_file);
  ASSERT_TRUE(r1.has_value());
  const text::Tokenizer& tiny = f.tiny->tokenizer;
  int32_t first = 0;
  while (tiny.token_text(first) == r1->token_text(first)) ++first;
  auto refused = DraftModel::create(*f.tiny->model, tiny, *r1, r1->n_vocab(), DraftModelOptions{});
  ASSERT_FALSE(refused.has_value());
  const std::string& msg = refused.status().message();
  EXPECT_NE(msg.find("token " + std::to_string(first) + " is \"" + tiny.token_text(first) +
                     "\" in the draft and \"" + r1->token_text(first) + "\" in the target"),
            std::string::npos)
      << msg;

  // The same tokenizer in another file of the same model is accepted.
  auto f32_file = GgufFile::open(std::string(PONDER_SHARED_DIR) + "/models/tiny-F32.gguf");
  ASSERT_TRUE(f32_file.has_value());
  auto f32_tok = text::Tokenizer::from_gguf(*f32_file);
  ASSERT_TRUE(f32_tok.has_value());
  EXPECT_TRUE(DraftModel::check_tokenizers(tiny, *f32_tok).is_ok());

  // Same texts but another EOS: refused, naming both.
  text::Tokenizer::Vocab v;
  for (int32_t id = 0; id < tiny.n_vocab(); ++id) {
    v.tokens.push_back(tiny.token_text(id));
    v.token_types.push_back(static_cast<int32_t>(tiny.token_type(id)));
  }
  v.bos = tiny.bos();
  v.eos = tiny.bos();
  auto other_eos = text::Tokenizer::from_vocab(v);
  ASSERT_TRUE(other_eos.has_value());
  const Status st = DraftModel::check_tokenizers(tiny, *other_eos);
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("BOS/EOS"), std::string::npos) << st.message();

  // A target whose vocabulary marks as padding ("[PAD<id>]", UNUSED) the ids the draft would
  // guess, and whose logits stop below the draft's vocabulary: neither is ever proposed.
  const auto prompt = f.encode("The quick brown fox jumps over the lazy dog.");
  DraftModelOptions o;
  o.kv_positions = 512;
  auto plain = f.make(o);
  const auto unmasked = f.greedy(*plain, prompt, 6);
  ASSERT_FALSE(unmasked.empty());
  v.eos = tiny.eos();
  for (int32_t id : unmasked) v.token_types[static_cast<size_t>(id)] = 5;  // UNUSED
  auto padded = text::Tokenizer::from_vocab(v);
  ASSERT_TRUE(padded.has_value());
  const int64_t target_n_vocab = tiny.n_vocab() - 100;
  auto masked = DraftModel::create(*f.tiny->model, tiny, *padded, target_n_vocab, o);
  ASSERT_TRUE(masked.has_value()) << masked.status().message();
  EXPECT_EQ((*masked)->n_real_vocab(), target_n_vocab);
  for (int32_t id : unmasked) EXPECT_FALSE((*masked)->is_proposable(id));
  const auto drafts = propose(**masked, f.pool, {1}, {prompt}, {6});
  ASSERT_FALSE(drafts[0].empty());
  EXPECT_EQ(drafts[0], f.greedy(**masked, prompt, 6));
  for (int32_t id : drafts[0]) {
    EXPECT_LT(id, target_n_vocab);
    EXPECT_TRUE(std::find(unmasked.begin(), unmasked.end(), id) == unmasked.end()) << id;
  }
}

}  // namespace
}  // namespace ponder
