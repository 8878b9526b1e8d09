// The OpenAI request schemas as pure logic: each field read, checked (type and range, never
// clamped) or refused by name.
#include "server/openai/openai_protocol.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ponder::server {
namespace {

using nlohmann::json;

json base() { return {{"messages", {{{"role", "user"}, {"content", "hi"}}}}}; }

std::optional<ApiError> parse(const json& j, GenerationRequest* g) {
  return parse_chat_request(j, ServingDefaults{}, g);
}

TEST(OpenAiProtocolTest, OmittedFieldsGetTheServerDefaults) {
  GenerationRequest g;
  ServingDefaults d;
  d.sampling.temperature = 0.6f;
  d.sampling.top_p = 0.95f;
  d.max_tokens = 100;
  ASSERT_FALSE(parse_chat_request(base(), d, &g));
  EXPECT_FLOAT_EQ(g.options.sampling.temperature, 0.6f);
  EXPECT_FLOAT_EQ(g.options.sampling.top_p, 0.95f);
  EXPECT_EQ(g.options.max_tokens, 100);
  EXPECT_EQ(g.n, 1);
  EXPECT_FALSE(g.stream);
  EXPECT_EQ(g.n_logprobs, -1);
}

TEST(OpenAiProtocolTest, EveryKnownFieldIsRead) {
  json j = base();
  j.update({{"temperature", 0.2},
            {"top_p", 0.5},
            {"top_k", 7},
            {"min_p", 0.1},
            {"presence_penalty", 0.5},
            {"frequency_penalty", -0.5},
            {"repetition_penalty", 1.1},
            {"seed", 42},
            {"stop", "END"},
            {"max_completion_tokens", 33},
            {"n", 3},
            {"stream", true},
            {"stream_options", {{"include_usage", true}}},
            {"logprobs", true},
            {"top_logprobs", 4},
            {"logit_bias", {{"12", -100}, {"7", 2.5}}},
            {"ignore_eos", true},
            {"user", "u1"},
            {"reasoning_format", "none"}});
  GenerationRequest g;
  ASSERT_FALSE(parse(j, &g));
  const SamplerParams& s = g.options.sampling;
  EXPECT_FLOAT_EQ(s.temperature, 0.2f);
  EXPECT_FLOAT_EQ(s.top_p, 0.5f);
  EXPECT_EQ(s.top_k, 7);
  EXPECT_FLOAT_EQ(s.min_p, 0.1f);
  EXPECT_FLOAT_EQ(s.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(s.frequency_penalty, -0.5f);
  EXPECT_FLOAT_EQ(s.repeat_penalty, 1.1f);
  EXPECT_EQ(s.seed, 42u);
  ASSERT_EQ(s.logit_bias.size(), 2u);
  EXPECT_EQ(s.logit_bias[0].first, 12);
  EXPECT_TRUE(std::isinf(s.logit_bias[0].second));  // -100 bans
  EXPECT_FLOAT_EQ(s.logit_bias[1].second, 2.5f);
  EXPECT_EQ(g.options.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(g.options.max_tokens, 33);
  EXPECT_FALSE(g.options.stop_at_eog);
  EXPECT_EQ(g.n, 3);
  EXPECT_TRUE(g.stream && g.include_usage);
  EXPECT_EQ(g.n_logprobs, 4);
  EXPECT_EQ(g.user, "u1");
  EXPECT_FALSE(g.split_reasoning);
}

TEST(OpenAiProtocolTest, MessagesTakeTextPartsAndTheDeveloperRole) {
  json j = {
      {"messages",
       {{{"role", "developer"}, {"content", "be brief"}},
        {{"role", "user"},
         {"content", {{{"type", "text"}, {"text", "a"}}, {{"type", "text"}, {"text", "b"}}}}}}}};
  GenerationRequest g;
  ASSERT_FALSE(parse(j, &g));
  ASSERT_EQ(g.messages.size(), 2u);
  EXPECT_EQ(g.messages[0].role, "system");
  EXPECT_EQ(g.messages[1].content, "ab");
}

TEST(OpenAiProtocolTest, WrongValuesAreRefusedByName) {
  struct Case {
    json patch;
    std::string param;
  };
  const std::vector<Case> cases = {
      {{{"temperature", -1}}, "temperature"},
      {{{"temperature", "1"}}, "temperature"},
      {{{"top_p", 0}}, "top_p"},
      {{{"n", 0}}, "n"},
      {{{"max_tokens", 0}}, "max_tokens"},
      {{{"max_tokens", 1.5}}, "max_tokens"},
      {{{"top_logprobs", 3}}, "top_logprobs"},
      {{{"stop", {1, 2}}}, "stop"},
      {{{"logit_bias", {{"x", 1}}}}, "logit_bias"},
      {{{"logit_bias", {{"5", 200}}}}, "logit_bias"},
      {{{"stream", "yes"}}, "stream"},
      {{{"tools", {{{"type", "function"}}}}}, "tools[0].function"},
      {{{"response_format", {{"type", "xml"}}}}, "response_format"},
      {json::parse(
           R"({"response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "string", "not": {}}}}})"),
       "response_format"},
      {json::parse(R"({"response_format": {"type": "json_schema"}})"), "response_format"},
      {json::parse(R"({"json_schema": {"type": "object"}, "grammar": "root ::= \"a\""})"),
       "response_format"},
      {json::parse(R"({"tools": [{"type": "function", "function": {"description": "no name"}}]})"),
       "tools[0].function.name"},
      {json::parse(
           R"({"tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": {"type": "function", "function": {"name": "g"}}})"),
       "tool_choice"},
      {json::parse(R"({"tool_choice": "auto"})"), "tool_choice"},
      {json::parse(
           R"({"messages": [{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "call_9", "content": "42"}]})"),
       "messages[1].tool_call_id"},
      {{{"messages", {{{"role", "robot"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "tool"}, {"content", "x"}}}}}, "messages[0].tool_call_id"},
      {{{"messages", {{{"role", "function"}, {"content", "x"}}}}}, "messages[0].role"},
      {{{"messages", {{{"role", "user"}, {"content", {{{"type", "image_url"}}}}}}}},
       "messages[0].content"},
      {{{"messages", "hi"}}, "messages"},
      {{{"messages", {{{"role", "user"}}}}},
       "messages[0].content"},  // only assistant turns may omit it
  };
  for (const Case& c : cases) {
    json j = base();
    j.update(c.patch);
    GenerationRequest g;
    auto e = parse(j, &g);
    ASSERT_TRUE(e.has_value()) << c.patch.dump();
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, c.param) << c.patch.dump() << ": " << e->message;
  }
}

TEST(OpenAiProtocolTest, ConstraintsAndToolsBecomeAGrammar) {
  GenerationRequest g;
  ASSERT_FALSE(parse_chat_request({{"messages", {{{"role", "user"}, {"content", "x"}}}},
                                   {"response_format", {{"type", "json_object"}}}},
                                  ServingDefaults{}, &g));
  EXPECT_FALSE(g.grammar.empty());
  EXPECT_EQ(g.grammar_field, "response_format");
  GenerationRequest t;
  const json tools = {
      {{"type", "function"},
       {"function",
        {{"name", "get_weather"},
         {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}};
  const json messages = {
      {{"role", "system"}, {"content", "Be brief."}},
      {{"role", "user"}, {"content", "Weather in Paris?"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls",
        {{{"id", "call_1"},
          {"type", "function"},
          {"function", {{"name", "get_weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "18 C"}}};
  ASSERT_FALSE(
      parse_chat_request({{"messages", messages}, {"tools", tools}, {"tool_choice", "required"}},
                         ServingDefaults{}, &t));
  EXPECT_TRUE(t.tool_calls);
  EXPECT_EQ(t.grammar_field, "tools");
  ASSERT_EQ(t.messages.size(), 4u);
  EXPECT_EQ(t.messages[0].content.rfind("Be brief.\n\n", 0),
            0u);  // the tool list joins the system prompt
  EXPECT_NE(t.messages[0].content.find("get_weather"), std::string::npos);
  ASSERT_EQ(t.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(t.messages[2].tool_calls[0].name, "get_weather");
  GenerationRequest none;
  ASSERT_FALSE(
      parse_chat_request({{"messages", messages}, {"tools", tools}, {"tool_choice", "none"}},
                         ServingDefaults{}, &none));
  EXPECT_TRUE(none.grammar.empty());
  EXPECT_FALSE(none.tool_calls);
}

TEST(OpenAiProtocolTest, CompletionPromptsAsTextOrIds) {
  GenerationRequest g;
  ASSERT_FALSE(
      parse_completion_request({{"prompt", "abc"}, {"logprobs", 2}}, ServingDefaults{}, &g));
  EXPECT_EQ(g.prompt, "abc");
  EXPECT_EQ(g.n_logprobs, 2);
  EXPECT_FALSE(g.split_reasoning);
  GenerationRequest ids;
  ASSERT_FALSE(parse_completion_request({{"prompt", {1, 2, 3}}}, ServingDefaults{}, &ids));
  EXPECT_EQ(ids.prompt_tokens, (std::vector<int32_t>{1, 2, 3}));
  GenerationRequest bad;
  EXPECT_EQ(
      parse_completion_request({{"prompt", "x"}, {"logprobs", 6}}, ServingDefaults{}, &bad)->param,
      "logprobs");
  EXPECT_EQ(parse_completion_request(json::object(), ServingDefaults{}, &bad)->param, "prompt");
  EXPECT_EQ(
      parse_completion_request({{"prompt", "x"}, {"echo", true}}, ServingDefaults{}, &bad)->param,
      "echo");
  EXPECT_EQ(
      parse_completion_request({{"prompt", "x"}, {"echo", "x"}}, ServingDefaults{}, &bad)->param,
      "echo");
  GenerationRequest no_echo;
  EXPECT_FALSE(
      parse_completion_request({{"prompt", "x"}, {"echo", false}}, ServingDefaults{}, &no_echo));
}

}  // namespace
}  // namespace ponder::server

namespace ponder::server {
namespace {

// Every field of the policy is read, never dropped: an honoured field with a value of the wrong
// type is refused naming it (a field nobody reads would pass), a fixed field at another value and
// a refused field are refused naming them, and unknown fields are listed.
TEST(OpenAiFieldPolicyTest, EveryKnownFieldIsReadOrRefusedByName) {
  for (const bool chat : {true, false}) {
    const json base =
        chat ? json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}} : json{{"prompt", "hi"}};
    const FieldPolicy policy = openai_field_policy(chat);
    auto refused_naming = [&](const std::string& name, const json& value) {
      json body = base;
      body[name] = value;
      GenerationRequest g;
      auto e = chat ? parse_chat_request(body, {}, &g) : parse_completion_request(body, {}, &g);
      ASSERT_TRUE(e.has_value()) << (chat ? "chat " : "completions ") << name << " = " << value;
      EXPECT_EQ(e->status, 400) << name;
      EXPECT_TRUE(e->param == name || e->param.rfind(name, 0) == 0 ||
                  e->message.find("'" + name) != std::string::npos)
          << name << ": " << e->message << " (param " << e->param << ")";
    };
    const json wrong = json::array({json::array({json::array()})});  // no field takes [[[]]]
    for (std::string_view name : policy.honoured) refused_naming(std::string(name), wrong);
    for (const FixedField& x : policy.fixed) {
      refused_naming(std::string(x.name), x.value.is_boolean() ? json(!x.value.get<bool>())
                                          : x.value.is_string()
                                              ? json("other")
                                              : json(x.value.get<double>() + 0.5));
      json body = base;  // at its fixed value it is taken
      body[std::string(x.name)] = x.value;
      GenerationRequest g;
      auto e = chat ? parse_chat_request(body, {}, &g) : parse_completion_request(body, {}, &g);
      EXPECT_FALSE(e.has_value()) << x.name << ": " << (e ? e->message : "");
    }
    for (const RefusedField& x : policy.refused) refused_naming(std::string(x.name), json(1));
    json body = base;
    body["frobnicate"] = 1;
    body["xyzzy"] = {{"a", 1}};
    GenerationRequest g;
    auto e = chat ? parse_chat_request(body, {}, &g) : parse_completion_request(body, {}, &g);
    ASSERT_FALSE(e.has_value());
    EXPECT_EQ(g.ignored_fields, (std::vector<std::string>{"frobnicate", "xyzzy"}));
  }
}

TEST(OpenAiFieldPolicyTest, ReasoningEffortAndTemplateKwargsControlTheThinking) {
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  ServingDefaults d;
  d.efforts = {10, 20, 30};
  for (const auto& [effort, budget] :
       std::vector<std::pair<std::string, int32_t>>{{"low", 10}, {"medium", 20}, {"high", 30}}) {
    GenerationRequest g;
    ASSERT_FALSE(parse_chat_request({{"messages", msgs}, {"reasoning_effort", effort}}, d, &g));
    EXPECT_TRUE(g.thinking);
    EXPECT_EQ(g.options.reasoning_budget, budget) << effort;
  }
  for (const json& off : {json{{"reasoning_effort", "minimal"}}, json{{"reasoning_effort", "none"}},
                          json{{"chat_template_kwargs", {{"enable_thinking", false}}}}}) {
    json body = off;
    body["messages"] = msgs;
    GenerationRequest g;
    ASSERT_FALSE(parse_chat_request(body, d, &g)) << off;
    EXPECT_FALSE(g.thinking) << off;
  }
  GenerationRequest g;
  auto e = parse_chat_request(
      {{"messages", msgs}, {"reasoning_effort", "low"}, {"reasoning_budget", 5}}, d, &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "reasoning_budget");
  e = parse_chat_request({{"messages", msgs}, {"chat_template_kwargs", {{"tools_mode", 1}}}}, d,
                         &g);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->param, "chat_template_kwargs");
}

}  // namespace
}  // namespace ponder::server
