// The response cache as a library: keys, the stored form of events, the memory and disk bounds.
#include "server/cache/response_cache.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace ponder::server {
namespace {

EngineRequest base_request() {
  EngineRequest r;
  r.prompt = {1, 2, 3};
  r.options.max_tokens = 10;
  r.options.sampling.temperature = 0;
  return r;
}

TEST(ResponseCacheTest, EveryOptionThatChangesTheAnswerChangesTheKey) {
  const EngineRequest r = base_request();
  const std::string k = response_cache_key("m", r, false, "block f16/f16", false);
  ASSERT_FALSE(k.empty());
  EXPECT_EQ(k, response_cache_key("m", r, false, "block f16/f16", false));
  std::vector<EngineRequest> variants(12, r);
  variants[0].prompt.push_back(4);
  variants[1].options.max_tokens = 11;
  variants[2].options.stop = {"x"};
  variants[3].options.sampling.top_k = 3;
  variants[4].options.sampling.repeat_penalty = 1.1f;
  variants[5].n_choices = 2;
  variants[6].n_logprobs = 1;
  variants[7].starts_in_thinking = true;
  variants[8].options.sampling.logit_bias = {{5, 1.0f}};
  variants[9].split_reasoning = false;
  // The constraint: its text and its options.
  variants[10].options.grammar = *grammar::Grammar::compile("root ::= \"a\"\n");
  variants[11].options.grammar = *grammar::Grammar::compile("root ::= \"b\"\n");
  EXPECT_NE(response_cache_key("m", variants[10], false, "block f16/f16", false),
            response_cache_key("m", variants[11], false, "block f16/f16", false));
  grammar::CompileOptions nl;
  nl.leading_newlines = 2;
  EngineRequest with_newlines = variants[10];
  with_newlines.options.grammar = *grammar::Grammar::compile("root ::= \"a\"\n", nl);
  EXPECT_NE(response_cache_key("m", with_newlines, false, "block f16/f16", false),
            response_cache_key("m", variants[10], false, "block f16/f16", false));
  for (const EngineRequest& v : variants)
    EXPECT_NE(response_cache_key("m", v, false, "block f16/f16", false), k);
  EXPECT_NE(response_cache_key("other-model", r, false, "block f16/f16", false), k);
  EXPECT_NE(response_cache_key("m", r, false, "ggml f16/f16", false), k);     // attention order
  EXPECT_NE(response_cache_key("m", r, false, "block q8_0/q8_0", false), k);  // KV types
  EXPECT_NE(response_cache_key("m", r, false, "block f16/f16", true), k);     // context shift
  // Greedy ignores the seed; sampling is cacheable only with the client's own seed.
  EngineRequest seeded = r;
  seeded.options.sampling.seed = 99;
  EXPECT_EQ(response_cache_key("m", seeded, false, "block f16/f16", false), k);
  EngineRequest hot = r;
  hot.options.sampling.temperature = 0.7f;
  EXPECT_EQ(response_cache_key("m", hot, false, "block f16/f16", false), "");
  EXPECT_NE(response_cache_key("m", hot, true, "block f16/f16", false), "");
}

TEST(ResponseCacheTest, KeysByQuestionKeepTheOptionsAndTheConversation) {
  const EngineRequest r = base_request();
  const std::string earlier = "user: hi\nassistant: hello\n", q = "What is  2+2?";
  const CacheKeys a = response_cache_keys("m", r, false, "n", false, &earlier, &q);
  ASSERT_FALSE(a.key.empty());
  EXPECT_EQ(a.question, q);
  const std::string same = "what is 2+2?";  // normalized alike
  EXPECT_EQ(response_cache_keys("m", r, false, "n", false, &earlier, &same).key, a.key);
  const std::string other_history = "user: hey\n";
  const CacheKeys b = response_cache_keys("m", r, false, "n", false, &other_history, &q);
  EXPECT_NE(b.key, a.key);
  EXPECT_NE(b.context, a.context);
  EngineRequest constrained = r;
  constrained.options.grammar = *grammar::Grammar::compile("root ::= \"4\"\n");
  EXPECT_NE(response_cache_keys("m", constrained, false, "n", false, &earlier, &q).context,
            a.context);
  EngineRequest hot = r;
  hot.options.sampling.temperature = 1;
  EXPECT_TRUE(response_cache_keys("m", hot, false, "n", false, &earlier, &q).key.empty());
}

TEST(ResponseCacheTest, EventsRoundTrip) {
  std::vector<EngineEvent> events(2);
  events[0].token = 42;
  events[0].reasoning = "think \xe2\x9c\x93";
  events[0].logprob = -0.25f;
  events[0].top_logprobs = {{42, -0.25f}, {7, -2.5f}};
  events[1].kind = EngineEvent::Kind::kDone;
  events[1].choice = 0;
  events[1].content = "tail";
  events[1].stats.n_prompt = 3;
  events[1].stats.n_gen = 1;
  events[1].stats.finish_reason = "length";
  events[1].stats.tokens = {42};
  auto back = decode_events(encode_events(events));
  ASSERT_TRUE(back.has_value());
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0].reasoning, events[0].reasoning);
  EXPECT_EQ((*back)[0].top_logprobs.size(), 2u);
  EXPECT_EQ((*back)[0].top_logprobs[1].token, 7);
  EXPECT_EQ((*back)[1].kind, EngineEvent::Kind::kDone);
  EXPECT_EQ((*back)[1].stats.finish_reason, "length");
  EXPECT_EQ((*back)[1].stats.tokens, events[1].stats.tokens);
  EXPECT_FALSE(decode_events("{\"not\": \"events\"}").has_value());
  EXPECT_FALSE(decode_events("[{\"k\": 0}]").has_value());
}

TEST(ResponseCacheTest, TheDiskIsBoundedAndKeepsTheMostRecent) {
  const std::string dir = std::string(PONDER_BINARY_DIR) + "/server_test_tmp/bounded";
  std::filesystem::remove_all(dir);
  std::vector<EngineEvent> big(1);
  big[0].kind = EngineEvent::Kind::kDone;
  big[0].content = std::string(1000, 'a');
  {
    ResponseCache cache(ResponseCacheConfig{dir, 20000, CacheMatch::kExact,
                                            std::nullopt});  // ~18 answers of ~1.1 KB
    for (int i = 0; i < 60; ++i) cache.store("key" + std::to_string(i), big);
    cache.flush();
    EXPECT_LE(cache.stats().entries_disk, 18);
    EXPECT_GE(cache.stats().entries_disk, 10);
    EXPECT_LE(cache.stats().entries_memory, 5);  // a quarter of the bytes
  }
  ResponseCache reopened(ResponseCacheConfig{dir, 20000, CacheMatch::kExact, std::nullopt});
  EXPECT_TRUE(reopened.lookup("key59").has_value());
  EXPECT_FALSE(reopened.lookup("key0").has_value());
  EXPECT_EQ(reopened.stats().hits, 1);
  EXPECT_EQ(reopened.stats().misses, 1);
}

}  // namespace
}  // namespace ponder::server
