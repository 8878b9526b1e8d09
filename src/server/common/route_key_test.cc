// The routing key: its order of sources, and the same key on every turn of a conversation.
#include "server/common/route_key.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

namespace ponder::server {
namespace {

GenerationRequest turn(std::vector<text::ChatMessage> messages) {
  GenerationRequest g;
  g.messages = std::move(messages);
  return g;
}

TEST(RouteKeyTest, Fnv1a64MatchesItsPublishedVectors) {
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
}

TEST(RouteKeyTest, EveryTurnOfAConversationHasTheSameKey) {
  const GenerationRequest first = turn({{"system", "You are terse."}, {"user", "What is 2+2?"}});
  const GenerationRequest third = turn({{"system", "You are terse."},
                                        {"user", "What is 2+2?"},
                                        {"assistant", "4"},
                                        {"user", "And 3+3?"},
                                        {"assistant", "6"},
                                        {"user", "Thanks"}});
  EXPECT_EQ(route_key(first), route_key(third));
  EXPECT_EQ(route_key(first), fmt::format("h-{:016x}", fnv1a64("You are terse.\x1fWhat is 2+2?")));
  EXPECT_NE(route_key(first),
            route_key(turn({{"system", "You are terse."}, {"user", "Another chat"}})));
  EXPECT_EQ(route_key(turn({{"user", "hi"}})),
            fmt::format("h-{:016x}", fnv1a64(std::string("\x1fhi"))));
}

TEST(RouteKeyTest, TheHeaderThenPromptCacheKeyThenUserWin) {
  GenerationRequest g = turn({{"user", "hi"}});
  g.user = "alice";
  EXPECT_EQ(route_key(g), "alice");
  g.prompt_cache_key = "support-bot-v2";
  EXPECT_EQ(route_key(g), "support-bot-v2");
  g.conversation_id = "c-123";
  EXPECT_EQ(route_key(g), "c-123");
}

TEST(RouteKeyTest, ARawPromptHashesItsStart) {
  GenerationRequest a, b;
  a.chat = b.chat = false;
  a.prompt = std::string(1024, 'x') + "tail one";
  b.prompt = std::string(1024, 'x') + "tail two";
  EXPECT_EQ(route_key(a), route_key(b));
}

}  // namespace
}  // namespace ponder::server
