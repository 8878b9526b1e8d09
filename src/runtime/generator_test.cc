#include "runtime/generator.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/tiny_model_for_test.h"
#include "text/stream_decoder.h"
#include "text/utf8.h"

namespace ponder {
namespace {

GenerateOptions greedy(int n) {
  GenerateOptions o;
  o.max_tokens = n;
  o.sampling.temperature = 0;
  o.stop_at_eog = false;
  return o;
}

TEST(GeneratorTest, PrefixReuseAndChunkingGiveTheSameTokens) {
  auto owned = load_tiny_model("Q8_0");
  TinyModel& f = *owned;
  const auto prompt =
      f.tokenizer.encode("The quick brown fox jumps over the lazy dog. Then", false);
  Generator fresh(*f.model, f.tokenizer, 256, 2, /*n_batch=*/256);
  auto a = fresh.generate(prompt, greedy(12), [](std::string_view) {});
  ASSERT_TRUE(a.has_value()) << a.status().message();
  EXPECT_EQ(a->n_reused, 0);
  EXPECT_EQ(a->n_gen, 12);

  // Small chunks, and a second call that shares the prompt: same tokens, prefix reused.
  Generator chunked(*f.model, f.tokenizer, 256, 1, /*n_batch=*/3);
  auto b = chunked.generate(prompt, greedy(12), [](std::string_view) {});
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(a->tokens, b->tokens);
  auto c = chunked.generate(prompt, greedy(12), [](std::string_view) {});
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->n_reused, static_cast<int32_t>(prompt.size()) - 1);
  EXPECT_EQ(a->tokens, c->tokens);
}

TEST(GeneratorTest, StreamsTextThatDecodesTheTokens) {
  auto owned = load_tiny_model("Q8_0");
  TinyModel& f = *owned;
  Generator g(*f.model, f.tokenizer, 128, 2);
  std::string streamed;
  auto s = g.generate(f.tokenizer.encode("Hello", false), greedy(20),
                      [&](std::string_view t) { streamed += t; });
  ASSERT_TRUE(s.has_value());
  std::vector<int32_t> visible;  // control tokens are not shown in a stream
  for (int32_t t : s->tokens) {
    if (!f.tokenizer.is_control(t)) visible.push_back(t);
  }
  // A stream never carries broken UTF-8: the same text, with invalid bytes as U+FFFD.
  EXPECT_TRUE(text::is_valid_utf8(streamed));
  text::StreamDecoder whole(f.tokenizer);
  const std::string expected = whole.feed_bytes(f.tokenizer.decode(visible)) + whole.flush();
  EXPECT_EQ(streamed, expected);
}

TEST(GeneratorTest, BadPromptsAreClearErrors) {
  auto owned = load_tiny_model("Q8_0");
  TinyModel& f = *owned;
  Generator g(*f.model, f.tokenizer, 16, 1);
  auto empty = g.generate({}, greedy(4), [](std::string_view) {});
  ASSERT_FALSE(empty.has_value());
  EXPECT_EQ(empty.status().message(), "the prompt is empty");
  std::vector<int32_t> long_prompt(17, 100);
  auto too_long = g.generate(long_prompt, greedy(4), [](std::string_view) {});
  ASSERT_FALSE(too_long.has_value());
  EXPECT_EQ(too_long.status().message(), "the prompt has 17 tokens but the context holds 16");
  auto bad = g.generate({1, 999999}, greedy(4), [](std::string_view) {});
  ASSERT_FALSE(bad.has_value());
  EXPECT_NE(bad.status().message().find("outside the vocabulary"), std::string::npos);
}

TEST(GeneratorTest, StopsAtContextEndAndOnCancel) {
  auto owned = load_tiny_model("Q8_0");
  TinyModel& f = *owned;
  Generator g(*f.model, f.tokenizer, 16, 1);
  auto s = g.generate({1, 2, 3, 4}, greedy(100), [](std::string_view) {});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->finish_reason, "context");
  EXPECT_EQ(s->n_gen, 13);  // positions 4..15 plus the last sampled token
  std::atomic<bool> cancel{true};
  auto c = g.generate(
      {1, 2, 3}, greedy(100), [](std::string_view) {}, &cancel);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->finish_reason, "cancelled");
  EXPECT_EQ(c->n_gen, 0);
}

TEST(GeneratorTest, SameSeedSameTokens) {
  auto owned = load_tiny_model("Q8_0");
  TinyModel& f = *owned;
  Generator g(*f.model, f.tokenizer, 128, 2);
  GenerateOptions o = greedy(16);
  o.sampling.temperature = 1.0f;
  o.sampling.top_k = 0;
  o.sampling.top_p = 1.0f;
  o.sampling.min_p = 0.0f;
  o.sampling.seed = 7;
  const auto prompt = f.tokenizer.encode("Once upon a time", false);
  auto a = g.generate(prompt, o, [](std::string_view) {});
  auto b = g.generate(prompt, o, [](std::string_view) {});
  o.sampling.seed = 8;
  auto c = g.generate(prompt, o, [](std::string_view) {});
  ASSERT_TRUE(a.has_value() && b.has_value() && c.has_value());
  EXPECT_EQ(a->tokens, b->tokens);
  EXPECT_NE(a->tokens, c->tokens);
}

}  // namespace
}  // namespace ponder
