// Anthropic's Messages request bodies as pure logic: read into a GenerationRequest (R1's roles for
// tool use and results, thinking controls, tools as a grammar), and every refusal Anthropic makes
// (a missing or wrong field, an unknown field, a block in the wrong turn) a 400 naming the field.
#include "server/anthropic/anthropic_protocol.h"

#include <gtest/gtest.h>

namespace ponder::server {
namespace {

using nlohmann::json;

json user(const json& content) { return {{"role", "user"}, {"content", content}}; }
json assistant(const json& content) { return {{"role", "assistant"}, {"content", content}}; }

// The messages as a vector: body({m}) is then a list of one message with every compiler (a json
// built from {m} is m itself with clang, a one-element array with GCC).
json body(const std::vector<json>& messages = {user("Hi")}) {
  return {{"model", "claude-anything"}, {"max_tokens", 64}, {"messages", messages}};
}

const json kWeatherTool = {{"name", "get_weather"},
                           {"description", "The weather of a city"},
                           {"input_schema",
                            {{"type", "object"},
                             {"properties", {{"city", {{"type", "string"}}}}},
                             {"required", {"city"}}}}};

// The error of a body that must be refused (an empty message when it is accepted).
ApiError refusal(const json& j, bool count_tokens = false) {
  GenerationRequest g;
  auto e = parse_messages_request(j, ServingDefaults{}, count_tokens, &g);
  return e ? *e : ApiError{0, "", "", "", ""};
}

TEST(AnthropicProtocolTest, ReadsTheCoreFields) {
  json j = body();
  j["system"] = json::array({{{"type", "text"}, {"text", "Be brief."}},
                             {{"type", "text"},
                              {"text", "Answer in French."},
                              {"cache_control", {{"type", "ephemeral"}}}}});
  j["temperature"] = 0.5;
  j["top_p"] = 0.9;
  j["top_k"] = 7;
  j["stop_sequences"] = {"END", "STOP"};
  j["stream"] = true;
  j["metadata"] = {{"user_id", "u-1"}};
  GenerationRequest g;
  ServingDefaults d;
  d.max_tokens = 32;
  ASSERT_FALSE(parse_messages_request(j, d, false, &g));
  ASSERT_EQ(g.messages.size(), 2u);
  EXPECT_EQ(g.messages[0].role, "system");
  EXPECT_EQ(g.messages[0].content, "Be brief.\n\nAnswer in French.");
  EXPECT_EQ(g.messages[1].role, "user");
  EXPECT_EQ(g.messages[1].content, "Hi");
  EXPECT_EQ(g.options.max_tokens, 32);  // capped by the server's -n
  EXPECT_FLOAT_EQ(g.options.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(g.options.sampling.top_p, 0.9f);
  EXPECT_EQ(g.options.sampling.top_k, 7);
  EXPECT_EQ(g.options.stop, (std::vector<std::string>{"END", "STOP"}));
  EXPECT_TRUE(g.stream);
  EXPECT_EQ(g.user, "u-1");
  EXPECT_TRUE(g.thinking);
  EXPECT_TRUE(g.split_reasoning);
  EXPECT_FALSE(g.tool_calls);
}

TEST(AnthropicProtocolTest, ThinkingEnabledDisabledAndItsBudgetRules) {
  json j = body();
  j["max_tokens"] = 4000;
  j["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  GenerationRequest g;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &g));
  EXPECT_EQ(g.options.reasoning_budget, 2048);
  EXPECT_TRUE(g.thinking);

  j["thinking"] = {{"type", "disabled"}};
  GenerationRequest off;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &off));
  EXPECT_FALSE(off.thinking);

  j["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1023}};
  EXPECT_EQ(refusal(j).status, 400);
  EXPECT_NE(refusal(j).message.find("budget_tokens"), std::string::npos);
  j["thinking"] = {{"type", "enabled"}, {"budget_tokens", 4000}};  // == max_tokens
  EXPECT_EQ(refusal(j).param, "max_tokens");
  j["thinking"] = {{"type", "enabled"}};
  EXPECT_EQ(refusal(j).param, "thinking.enabled.budget_tokens");
  j["thinking"] = {{"type", "sometimes"}};
  EXPECT_EQ(refusal(j).param, "thinking.type");
  j["thinking"] = {{"type", "disabled"}, {"budget_tokens", 2048}};
  EXPECT_EQ(refusal(j).message, "thinking.disabled.budget_tokens: Extra inputs are not permitted");
}

TEST(AnthropicProtocolTest, ToolUseAndResultsBecomeR1Roles) {
  json j = body({user("Weather in Paris?"),
                 assistant(json::array(
                     {{{"type", "thinking"}, {"thinking", "I should call"}, {"signature", "x"}},
                      {{"type", "text"}, {"text", "Let me look."}},
                      {{"type", "tool_use"},
                       {"id", "toolu_1"},
                       {"name", "get_weather"},
                       {"input", {{"city", "Paris"}}}}})),
                 user(json::array({{{"type", "tool_result"},
                                    {"tool_use_id", "toolu_1"},
                                    {"content", {{{"type", "text"}, {"text", "sunny"}}}}},
                                   {{"type", "text"}, {"text", "And tomorrow?"}}}))});
  j["tools"] = json::array({kWeatherTool});
  j["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  GenerationRequest g;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &g));
  // system (the tool list), user, assistant with its call, tool, user.
  ASSERT_EQ(g.messages.size(), 5u);
  EXPECT_EQ(g.messages[0].role, "system");
  EXPECT_NE(g.messages[0].content.find("get_weather"), std::string::npos);
  EXPECT_EQ(g.messages[2].role, "assistant");
  EXPECT_EQ(g.messages[2].content, "Let me look.");  // the thinking block dropped
  ASSERT_EQ(g.messages[2].tool_calls.size(), 1u);
  EXPECT_EQ(g.messages[2].tool_calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(g.messages[2].tool_calls[0].arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(g.messages[3].role, "tool");
  EXPECT_EQ(g.messages[3].content, "sunny");
  EXPECT_EQ(g.messages[3].tool_call_id, "toolu_1");
  EXPECT_EQ(g.messages[4].content, "And tomorrow?");
  EXPECT_TRUE(g.tool_calls);
  EXPECT_EQ(g.grammar_field, "tools");
  EXPECT_FALSE(g.grammar.empty());
}

TEST(AnthropicProtocolTest, ToolChoiceNoneAndErrorResults) {
  json j = body({user("q"),
                 assistant(json::array({{{"type", "tool_use"},
                                         {"id", "t1"},
                                         {"name", "get_weather"},
                                         {"input", json::object()}}})),
                 user(json::array({{{"type", "tool_result"},
                                    {"tool_use_id", "t1"},
                                    {"content", "no such city"},
                                    {"is_error", true}}}))});
  j["tools"] = json::array({kWeatherTool});
  j["tool_choice"] = {{"type", "none"}};
  GenerationRequest g;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &g));
  EXPECT_FALSE(g.tool_calls);
  EXPECT_TRUE(g.grammar.empty());
  ASSERT_EQ(g.messages.size(), 3u);  // no user message for a turn of tool results only
  EXPECT_EQ(g.messages[2].content, "Error: no such city");
  j["messages"][2]["content"][0]["is_error"] = nullptr;  // null: not an error, no exception
  GenerationRequest plain;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &plain));
  EXPECT_EQ(plain.messages[2].content, "no such city");
}

TEST(AnthropicProtocolTest, RefusesWhatAnthropicRefuses) {
  json j = body();
  j.erase("max_tokens");
  EXPECT_EQ(refusal(j).message, "max_tokens: Field required");
  j = body();
  j.erase("model");
  EXPECT_EQ(refusal(j).param, "model");
  EXPECT_EQ(refusal(body(json::array())).param, "messages");
  EXPECT_EQ(refusal(body({assistant("Hello")})).param, "messages.0");
  EXPECT_EQ(refusal(body({{{"role", "system"}, {"content", "x"}}})).param, "messages.0.role");
  EXPECT_EQ(refusal(body({user("")})).param, "messages.0.content");
  j = body();
  j["frequency_penalty"] = 0.5;  // OpenAI's, not Anthropic's
  EXPECT_EQ(refusal(j).message, "frequency_penalty: Extra inputs are not permitted");
  j = body({{{"role", "user"}, {"content", "hi"}, {"name", "bob"}}});
  EXPECT_EQ(refusal(j).message, "messages.0.name: Extra inputs are not permitted");
  j = body();
  j["temperature"] = 1.5;  // Anthropic's range is 0 to 1
  EXPECT_EQ(refusal(j).param, "temperature");
  j = body();
  j["stop_sequences"] = "END";  // a list, as Anthropic's schema says
  EXPECT_EQ(refusal(j).param, "stop_sequences");
  j = body();
  j["max_tokens"] = 0;
  EXPECT_EQ(refusal(j).param, "max_tokens");
  // A tool_result that answers no earlier tool_use.
  j = body({user(
      json::array({{{"type", "tool_result"}, {"tool_use_id", "toolu_x"}, {"content", "42"}}}))});
  EXPECT_EQ(refusal(j).param, "messages.0.content.0.tool_use_id");
  // Blocks in the wrong turn, unknown block types.
  j = body(
      {user(json::array({{{"type", "tool_use"}, {"id", "a"}, {"name", "f"}, {"input", {}}}}))});
  EXPECT_EQ(refusal(j).param, "messages.0.content.0.type");
  j = body({user(json::array({{{"type", "video"}, {"url", "x"}}}))});
  EXPECT_EQ(refusal(j).param, "messages.0.content.0.type");
  // A final assistant turn (prefill) is not implemented.
  EXPECT_EQ(refusal(body({user("a"), assistant("b")})).code, "unsupported_parameter");
  // tool_choice any/tool without tools, and naming a tool not offered.
  j = body();
  j["tool_choice"] = {{"type", "any"}};
  EXPECT_EQ(refusal(j).param, "tool_choice");
  j["tools"] = json::array({kWeatherTool});
  j["tool_choice"] = {{"type", "tool"}, {"name", "get_time"}};
  EXPECT_EQ(refusal(j).param, "tool_choice.tool.name");
  j["tools"] = {{{"name", "bad name"}, {"input_schema", {{"type", "object"}}}}};
  j.erase("tool_choice");
  EXPECT_EQ(refusal(j).param, "tools.0.name");
  j["tools"] = {{{"name", "f"}}};
  EXPECT_EQ(refusal(j).param, "tools.0.input_schema");
}

TEST(AnthropicProtocolTest, UnimplementedFieldsAreRefusedByName) {
  for (const char* name : {"container", "mcp_servers", "service_tier", "inference_geo"}) {
    json j = body();
    j[name] = "x";
    const ApiError e = refusal(j);
    EXPECT_EQ(e.status, 400) << name;
    EXPECT_EQ(e.code, "unsupported_parameter") << name;
    EXPECT_EQ(e.param, name);
  }
  json j = body({user(
      json::array({{{"type", "image"}, {"source", {{"type", "base64"}, {"data", "AAAA"}}}}}))});
  EXPECT_EQ(refusal(j).code, "unsupported_parameter");
  EXPECT_NE(refusal(j).message.find("image"), std::string::npos);
  j = body();
  j["tools"] = {{{"type", "web_search_20250305"}, {"name", "web_search"}}};
  EXPECT_EQ(refusal(j).code, "unsupported_parameter");
  // cache_control is a hint Ponder's automatic prefix cache needs nothing from: accepted.
  j = body({user(json::array(
      {{{"type", "text"}, {"text", "hi"}, {"cache_control", {{"type", "ephemeral"}}}}}))});
  j["cache_control"] = {{"type", "ephemeral"}, {"ttl", "1h"}};
  EXPECT_EQ(refusal(j).status, 0);
  j["cache_control"] = {{"type", "permanent"}};
  EXPECT_EQ(refusal(j).param, "cache_control");
  j["cache_control"] = {{"type", 5}};  // a wrong type is a 400, never an exception
  EXPECT_EQ(refusal(j).param, "cache_control");
  j["cache_control"] = {{"type", "ephemeral"}, {"ttl", 5}};
  EXPECT_EQ(refusal(j).param, "cache_control.ttl");
}

TEST(AnthropicProtocolTest, ParallelCallsEffortAndOutputFormat) {
  json j = body();
  j["tools"] = json::array({kWeatherTool});
  j["tool_choice"] = {{"type", "any"}};
  GenerationRequest parallel, single;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &parallel));
  j["tool_choice"]["disable_parallel_tool_use"] = true;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &single));
  EXPECT_NE(parallel.grammar, single.grammar);  // one call only: no "\n" and a second call
  EXPECT_LT(single.grammar.size(), parallel.grammar.size());

  j = body();
  j["output_config"] = {{"effort", "low"}};
  ServingDefaults d;
  d.efforts.low = 77;
  GenerationRequest low;
  ASSERT_FALSE(parse_messages_request(j, d, false, &low));
  EXPECT_EQ(low.options.reasoning_budget, 77);
  j["output_config"] = {{"effort", "minimal"}};
  EXPECT_EQ(refusal(j).param, "output_config.effort");
  j["output_config"] = {{"format",
                         {{"type", "json_schema"},
                          {"schema", {{"type", "object"}, {"properties", json::object()}}}}}};
  GenerationRequest formatted;
  ASSERT_FALSE(parse_messages_request(j, ServingDefaults{}, false, &formatted));
  EXPECT_EQ(formatted.grammar_field, "output_config.format");
  EXPECT_FALSE(formatted.grammar.empty());

  j = body();
  j["thinking"] = {{"type", "adaptive"}};
  GenerationRequest adaptive;
  ServingDefaults with_budget;
  with_budget.reasoning_budget = 300;
  ASSERT_FALSE(parse_messages_request(j, with_budget, false, &adaptive));
  EXPECT_TRUE(adaptive.thinking);
  EXPECT_EQ(adaptive.options.reasoning_budget, 300);  // the server's own
}

// Every field of the table is read (a wrong value is a 400 naming it), taken only at its fixed
// value, or refused by name: a field nobody reads fails here.
TEST(AnthropicFieldPolicyTest, EveryKnownFieldIsReadOrRefusedByName) {
  for (const bool count_tokens : {false, true}) {
    json base = body();
    if (count_tokens) base.erase("max_tokens");
    const FieldPolicy policy = anthropic_field_policy(count_tokens);
    auto refused_naming = [&](const std::string& name, const json& value) {
      json b = base;
      b[name] = value;
      const ApiError e = refusal(b, count_tokens);
      EXPECT_EQ(e.status, 400) << name << " = " << value;
      EXPECT_EQ(e.param.rfind(name, 0), 0u) << name << ": " << e.message;
    };
    const json wrong = json::array({json::array({json::array()})});  // no field takes [[[]]]
    for (std::string_view name : policy.honoured) refused_naming(std::string(name), wrong);
    for (const FixedField& x : policy.fixed) {
      refused_naming(std::string(x.name), "other");
      json b = base;
      b[std::string(x.name)] = x.value;
      EXPECT_EQ(refusal(b, count_tokens).status, 0) << x.name;
    }
    for (const RefusedField& x : policy.refused) refused_naming(std::string(x.name), json(1));
    json b = base;
    b["n"] = 2;  // OpenAI's: unknown here, refused as Anthropic refuses it
    EXPECT_EQ(refusal(b, count_tokens).message, "n: Extra inputs are not permitted");
  }
}

TEST(AnthropicProtocolTest, CountTokensNeedsNoMaxTokens) {
  json j = body();
  j.erase("max_tokens");
  j["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2048}};
  EXPECT_EQ(refusal(j, true).status, 0);
  j["stream"] = true;  // not a count_tokens field
  EXPECT_EQ(refusal(j, true).message, "stream: Extra inputs are not permitted");
}

TEST(AnthropicProtocolTest, ErrorShapeAndStopReasons) {
  const json e = anthropic_error_json(ApiError::unauthorized());
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["error"]["type"], "authentication_error");
  EXPECT_EQ(anthropic_error_type(404), "not_found_error");
  EXPECT_EQ(anthropic_error_type(429), "rate_limit_error");
  EXPECT_EQ(anthropic_error_type(503), "overloaded_error");
  EXPECT_EQ(anthropic_error_type(500), "api_error");
  EXPECT_EQ(anthropic_stop_reason("length", false, false), "max_tokens");
  EXPECT_EQ(anthropic_stop_reason("stop", true, false), "tool_use");
  EXPECT_EQ(anthropic_stop_reason("stop", false, true), "stop_sequence");
  EXPECT_EQ(anthropic_stop_reason("stop", false, false), "end_turn");
}

}  // namespace
}  // namespace ponder::server
