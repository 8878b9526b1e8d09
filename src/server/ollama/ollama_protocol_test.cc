// Ollama's request bodies as pure logic: /api/chat and /api/generate read into a
// GenerationRequest, wrong types refused with a message (never thrown, never ignored).
#include "server/ollama/ollama_protocol.h"

#include <gtest/gtest.h>

namespace ponder::server {
namespace {

using nlohmann::json;

std::optional<std::string> parse(const json& j, bool chat, GenerationRequest* g, bool* think,
                                 ServingDefaults d = {}, OllamaRequest* extra = nullptr) {
  OllamaRequest x;
  auto e = parse_ollama_request(j, d, chat, g, extra ? extra : &x);
  *think = (extra ? extra : &x)->show_thinking;
  return e;
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
      {{{"messages", json::array({1})}}, true},
      {{{"messages", {{{"role", "user"}, {"content", "x"}, {"images", {"aGk="}}}}}}, true},
      {{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"keep_alive", "5 minutes"}}, true},
      {{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"think", "max"}}, true},
      {{{"prompt", "x"}, {"options", {{"num_gpu", 1}}}}, false},
      {{{"prompt", "x"}, {"options", {{"typical_p", 0.9}}}}, false},
      {{{"prompt", "x"}, {"options", {{"num_thread", 8}}}}, false},
      {{{"prompt", "x"}, {"options", {{"num_ctx", "big"}}}}, false},
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

// Ollama's load / unload idiom: no prompt or no messages is not an error but a request that is
// answered at once; keep_alive 0 unloads.
TEST(OllamaProtocolTest, NoPromptOrNoMessagesIsTheLoadIdiom) {
  for (const json& body : {json{{"model", "m"}, {"prompt", ""}, {"keep_alive", 0}},
                           json{{"model", "m"}}, json{{"model", "m"}, {"messages", json::array()}},
                           json{{"model", "m"}, {"messages", nullptr}, {"keep_alive", "10m"}}}) {
    GenerationRequest g;
    OllamaRequest x;
    bool think = true;
    const bool chat = body.contains("messages");
    ASSERT_FALSE(parse(body, chat, &g, &think, {}, &x)) << body.dump();
    EXPECT_TRUE(x.load_only) << body.dump();
  }
  GenerationRequest g;
  OllamaRequest x;
  bool think = true;
  ASSERT_FALSE(parse({{"prompt", ""}, {"keep_alive", 0}}, false, &g, &think, {}, &x));
  ASSERT_TRUE(x.keep_alive_s.has_value());
  EXPECT_EQ(*x.keep_alive_s, 0);
}

TEST(OllamaProtocolTest, KeepAliveDurations) {
  EXPECT_EQ(parse_keep_alive(json(300)), 300);
  EXPECT_EQ(parse_keep_alive(json("5m")), 300);
  EXPECT_EQ(parse_keep_alive(json("1h30m")), 5400);
  EXPECT_EQ(parse_keep_alive(json("-1")), -1);
  EXPECT_EQ(parse_keep_alive(json("0")), 0);
  EXPECT_NEAR(*parse_keep_alive(json("1.5s")), 1.5, 1e-12);
  EXPECT_NEAR(*parse_keep_alive(json("250ms")), 0.25, 1e-12);
  for (const char* bad : {"", "5 m", "m", "5x", "1h-5m", "5m5", "h5"})
    EXPECT_FALSE(parse_keep_alive(json(bad)).has_value()) << bad;
  EXPECT_FALSE(parse_keep_alive(json::array()).has_value());
}

// think: false turns the thinking phase off; an effort sets the budget of --effort-budgets.
TEST(OllamaProtocolTest, ThinkFalseAndEfforts) {
  ServingDefaults d;
  d.efforts = {100, 200, -1};
  const json msgs = {{{"role", "user"}, {"content", "x"}}};
  GenerationRequest off;
  bool think = true;
  ASSERT_FALSE(parse({{"messages", msgs}, {"think", false}}, true, &off, &think, d));
  EXPECT_FALSE(off.thinking);
  EXPECT_FALSE(think);
  for (const auto& [effort, budget] :
       std::vector<std::pair<std::string, int32_t>>{{"low", 100}, {"medium", 200}, {"high", -1}}) {
    GenerationRequest g;
    ASSERT_FALSE(parse({{"messages", msgs}, {"think", effort}}, true, &g, &think, d));
    EXPECT_TRUE(g.thinking) << effort;
    EXPECT_TRUE(think) << effort;
    EXPECT_EQ(g.options.reasoning_budget, budget) << effort;
  }
}

// Options: honoured ones set the request, the runner's are taken at the values that say what
// Ponder does, unknown names are listed (never dropped in silence).
TEST(OllamaProtocolTest, OptionsHonouredFixedOrListedAsIgnored) {
  GenerationRequest g;
  bool think = true;
  const json body = {{"prompt", "x"},
                     {"keep_alive", "5m"},
                     {"surprise", 1},
                     {"options",
                      {{"num_ctx", 512},
                       {"num_keep", 4},
                       {"num_gpu", 0},
                       {"use_mmap", true},
                       {"typical_p", 1.0},
                       {"mystery", 2}}}};
  ASSERT_FALSE(parse(body, false, &g, &think));
  EXPECT_EQ(g.context_limit, 512);
  EXPECT_EQ(g.context_limit_field, "options.num_ctx");
  EXPECT_EQ(g.options.n_keep, 4);
  EXPECT_EQ(g.ignored_fields, (std::vector<std::string>{"surprise", "options.mystery"}));
}

}  // namespace
}  // namespace ponder::server

namespace ponder::server {
namespace {

// Every option and top-level field of the Ollama policies is read or refused by name: a wrong
// type is refused naming the field (a field nobody reads would pass).
TEST(OllamaProtocolTest, EveryKnownFieldIsReadOrRefusedByName) {
  const json wrong = json::array({json::array({json::array()})});
  for (const bool chat : {true, false}) {
    const json base =
        chat ? json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}} : json{{"prompt", "hi"}};
    auto refused_naming = [&](const json& body, const std::string& name) {
      GenerationRequest g;
      bool think = true;
      auto e = parse(body, chat, &g, &think);
      ASSERT_TRUE(e.has_value()) << body.dump();
      EXPECT_NE(e->find("'" + name), std::string::npos) << name << ": " << *e;
    };
    for (std::string_view n : ollama_field_policy(chat).honoured) {
      const std::string name(n);
      if (name == "model") continue;  // one model is served: any name (docs/server.md)
      json body = base;
      body[name] = wrong;
      refused_naming(body, name);
    }
    for (std::string_view n : ollama_options_policy().honoured) {
      json body = base;
      body["options"] = {{std::string(n), wrong}};
      refused_naming(body, std::string(n));
    }
    for (const FixedField& x : ollama_options_policy().fixed) {
      json body = base;
      body["options"] = {{std::string(x.name), x.value.is_boolean()
                                                   ? json(!x.value.get<bool>())
                                                   : json(x.value.get<double>() + 0.5)}};
      refused_naming(body, "options." + std::string(x.name));
    }
    for (const RefusedField& x : ollama_options_policy().refused) {
      json body = base;
      body["options"] = {{std::string(x.name), 1}};
      refused_naming(body, "options." + std::string(x.name));
    }
  }
}

}  // namespace
}  // namespace ponder::server
