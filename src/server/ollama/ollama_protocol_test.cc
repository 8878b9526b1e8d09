// Ollama's request bodies as pure logic: /api/chat and /api/generate read into a
// GenerationRequest, wrong types refused with a message (never thrown, never ignored).
#include "server/ollama/ollama_protocol.h"

#include <gtest/gtest.h>

namespace ponder::server {
namespace {

using nlohmann::json;

std::optional<std::string> parse(const json& j, bool chat, GenerationRequest* g, bool* think,
                                 ServingDefaults d = {}) {
  return parse_ollama_request(j, d, chat, g, think);
}

TEST(OllamaProtocolTest, ChatReadsMessagesThinkStreamAndOptions) {
  GenerationRequest g;
  bool think = true;
  ServingDefaults d;
  d.max_tokens = 50;
  const json j = {
      {"model", "tiny"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "hi"}}}},
      {"think", false},
      {"options", {{"num_predict", 80}, {"temperature", 0.2}, {"seed", 3}}}};
  ASSERT_FALSE(parse(j, true, &g, &think, d));
  EXPECT_TRUE(g.chat);
  ASSERT_EQ(g.messages.size(), 2u);
  EXPECT_EQ(g.messages[0].role, "system");
  EXPECT_EQ(g.messages[1].content, "hi");
  EXPECT_FALSE(think);
  EXPECT_TRUE(g.stream);                // Ollama streams unless told not to
  EXPECT_EQ(g.options.max_tokens, 50);  // num_predict capped by the server's -n
  EXPECT_FLOAT_EQ(g.options.sampling.temperature, 0.2f);
  EXPECT_TRUE(g.seed_given);
}

TEST(OllamaProtocolTest, GenerateWithSystemOrRaw) {
  GenerationRequest g;
  bool think = true;
  ASSERT_FALSE(
      parse({{"prompt", "Why?"}, {"system", "Be brief."}, {"stream", false}}, false, &g, &think));
  EXPECT_TRUE(g.chat);
  ASSERT_EQ(g.messages.size(), 2u);
  EXPECT_EQ(g.messages[0].content, "Be brief.");
  EXPECT_EQ(g.messages[1].content, "Why?");
  EXPECT_FALSE(g.stream);
  GenerationRequest raw;
  ASSERT_FALSE(parse({{"prompt", "<|im_start|>x"}, {"raw", true}}, false, &raw, &think));
  EXPECT_FALSE(raw.chat);
  EXPECT_EQ(raw.prompt, "<|im_start|>x");
}

TEST(OllamaProtocolTest, WrongTypesAreRefusedByName) {
  const std::pair<json, bool> cases[] = {
      {json::array(), true},
      {{{"messages", "x"}}, true},
      {{{"messages", json::array()}}, true},
      {{{"messages", {{{"role", "pilot"}, {"content", "x"}}}}}, true},
      {{{"messages", {{{"role", "user"}, {"content", 5}}}}}, true},
      {{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"options", "x"}}, true},
      {{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"think", "yes"}}, true},
      {{{"prompt", 5}}, false},
      {{{"prompt", "x"}, {"raw", "x"}}, false},  // once thrown out of the I/O thread
      {{{"prompt", "x"}, {"system", 5}}, false},
      {{{"prompt", "x"}, {"options", {{"num_predict", "x"}}}}, false},
  };
  for (const auto& [body, chat] : cases) {
    GenerationRequest g;
    bool think = true;
    auto e = parse(body, chat, &g, &think);
    ASSERT_TRUE(e.has_value()) << body.dump();
    EXPECT_FALSE(e->empty()) << body.dump();
  }
}

}  // namespace
}  // namespace ponder::server
