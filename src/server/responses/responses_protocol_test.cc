// The Responses API's request parser (items into chat messages, tools, text.format, reasoning,
// previous_response_id, the refusals) and ResponseOutput (items and streaming events from an
// answer, the same however the answer is split).
#include "server/responses/responses_protocol.h"

#include <gtest/gtest.h>

#include <random>

#include "server/responses/response_output.h"

namespace ponder::server {
namespace {

using nlohmann::json;

std::optional<ApiError> parse(const json& body, ResponsesRequest* out,
                              const ConversationLookup& lookup = nullptr) {
  ServingDefaults d;
  return parse_responses_request(body, d, lookup, out);
}

// The 400 a body gets (its param and code), or "ok".
std::string refusal(const json& body) {
  ResponsesRequest r;
  auto e = parse(body, &r);
  if (!e) return "ok";
  EXPECT_EQ(e->status, 400);
  return e->param + (e->code.empty() ? "" : " " + e->code);
}

const json kWeather = json::parse(R"({"type": "function", "name": "get_weather",
  "description": "Weather of a city", "parameters": {"type": "object",
  "properties": {"city": {"type": "string"}}, "required": ["city"]}, "strict": true})");

TEST(ResponsesProtocolTest, AStringInputIsOneUserMessageAndTheSettingsAreEchoed) {
  ResponsesRequest r;
  ASSERT_FALSE(parse({{"model", "m"},
                      {"input", "Hi"},
                      {"max_output_tokens", 20},
                      {"temperature", 0.5},
                      {"instructions", "Be brief."}},
                     &r));
  ASSERT_EQ(r.g.messages.size(), 2u);
  EXPECT_EQ(r.g.messages[0].role, "system");
  EXPECT_EQ(r.g.messages[0].content, "Be brief.");
  EXPECT_EQ(r.g.messages[1].role, "user");
  EXPECT_EQ(r.g.messages[1].content, "Hi");
  EXPECT_EQ(r.g.options.max_tokens, 20);
  EXPECT_TRUE(r.store);
  EXPECT_FALSE(r.g.stream);
  EXPECT_EQ(r.input_items.size(), 1u);
  EXPECT_EQ(r.input_items[0]["content"][0]["text"], "Hi");
  EXPECT_EQ(r.settings["instructions"], "Be brief.");
  EXPECT_EQ(r.settings["max_output_tokens"], 20);
  EXPECT_EQ(r.settings["temperature"], 0.5);
  EXPECT_EQ(r.settings["top_p"], 0.95);  // the model card's default, as written
  EXPECT_EQ(r.settings["tool_choice"], "auto");
  EXPECT_EQ(r.settings["tools"], json::array());
  EXPECT_EQ(r.settings["text"]["format"]["type"], "text");
  EXPECT_EQ(r.settings["previous_response_id"], nullptr);
  EXPECT_EQ(r.settings["parallel_tool_calls"], true);
}

TEST(ResponsesProtocolTest, ItemsBecomeMessagesCallsAndToolResults) {
  const json input = json::parse(R"([
    {"role": "developer", "content": "Rules."},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather "},
                                                    {"type": "input_text", "text": "in Paris?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "hmm"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look.", "annotations": []}]},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
    {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\":\"Lyon\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "18 C"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "20 C"}]}
  ])");
  ResponsesRequest r;
  ASSERT_FALSE(parse({{"input", input}}, &r));
  ASSERT_EQ(r.g.messages.size(), 5u);
  EXPECT_EQ(r.g.messages[0].role, "system");
  EXPECT_EQ(r.g.messages[1].content, "Weather in Paris?");
  EXPECT_EQ(r.g.messages[2].role, "assistant");
  EXPECT_EQ(r.g.messages[2].content, "Let me look.");
  ASSERT_EQ(r.g.messages[2].tool_calls.size(), 2u);  // both calls join that assistant turn
  EXPECT_EQ(r.g.messages[2].tool_calls[1].arguments, "{\"city\":\"Lyon\"}");
  EXPECT_EQ(r.g.messages[3].role, "tool");
  EXPECT_EQ(r.g.messages[3].tool_call_id, "c1");
  EXPECT_EQ(r.g.messages[4].content, "20 C");
  EXPECT_EQ(r.input_items.size(), 7u);  // the reasoning item is not kept
}

TEST(ResponsesProtocolTest, PreviousResponseIdPrependsItsConversation) {
  const json earlier = json::parse(R"([
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "get_weather", "arguments": "{}", "status": "completed"}
  ])");
  ConversationLookup lookup = [&](const std::string& id) -> std::optional<json> {
    if (id == "resp_1") return earlier;
    return std::nullopt;
  };
  ResponsesRequest r;
  const json next = {
      {"previous_response_id", "resp_1"},
      {"input", {{{"type", "function_call_output"}, {"call_id", "call_9"}, {"output", "sunny"}}}}};
  ASSERT_FALSE(parse(next, &r, lookup));
  ASSERT_EQ(r.g.messages.size(), 3u);
  EXPECT_EQ(r.g.messages[0].content, "Weather?");
  EXPECT_EQ(r.g.messages[1].tool_calls[0].id, "call_9");
  EXPECT_EQ(r.g.messages[2].role, "tool");
  EXPECT_EQ(r.settings["previous_response_id"], "resp_1");
  json unknown = next;
  unknown["previous_response_id"] = "resp_2";
  ResponsesRequest r2;
  auto e = parse(unknown, &r2, lookup);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "previous_response_id");
  EXPECT_EQ(e->code, "previous_response_not_found");
  // Without the earlier call, the output answers nothing.
  EXPECT_EQ(refusal({{"input", next["input"]}}), "input[0].call_id");
}

TEST(ResponsesProtocolTest, AnItemReferenceIsTheStoredItem) {
  const ItemLookup find = [](const std::string& id) -> std::optional<json> {
    if (id != "fc_7") return std::nullopt;
    return json::parse(
        R"({"type": "function_call", "id": "fc_7", "call_id": "call_7", "name": "f", "arguments": "{}"})");
  };
  const json input = json::parse(R"([{"role": "user", "content": "Go"},
    {"type": "item_reference", "id": "fc_7"},
    {"type": "function_call_output", "call_id": "call_7", "output": "done"}])");
  ResponsesRequest r;
  ASSERT_FALSE(parse_responses_request({{"input", input}}, ServingDefaults{}, nullptr, &r, find));
  ASSERT_EQ(r.g.messages.size(), 3u);
  EXPECT_EQ(r.g.messages[1].tool_calls[0].id, "call_7");
  EXPECT_EQ(r.input_items[1]["type"], "function_call");  // kept resolved for the next turn
  json unknown = input;
  unknown[1]["id"] = "fc_8";
  ResponsesRequest r2;
  auto e = parse_responses_request({{"input", unknown}}, ServingDefaults{}, nullptr, &r2, find);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "input[1].id");
  EXPECT_NE(e->message.find("fc_8"), std::string::npos);
}

TEST(ResponsesProtocolTest, ToolsToolChoiceAndTextFormat) {
  ResponsesRequest r;
  ASSERT_FALSE(
      parse({{"input", "Weather?"}, {"tools", {kWeather}}, {"tool_choice", "required"}}, &r));
  EXPECT_TRUE(r.g.tool_calls);
  EXPECT_EQ(r.g.grammar_field, "tools");
  EXPECT_EQ(r.g.messages[0].role, "system");  // the tool list
  EXPECT_NE(r.g.messages[0].content.find("get_weather"), std::string::npos);
  EXPECT_EQ(r.settings["tools"][0]["name"], "get_weather");
  EXPECT_EQ(r.settings["tool_choice"], "required");
  ResponsesRequest named;
  ASSERT_FALSE(parse({{"input", "x"},
                      {"tools", {kWeather}},
                      {"tool_choice", {{"type", "function"}, {"name", "get_weather"}}}},
                     &named));
  EXPECT_TRUE(named.g.tool_calls);
  ResponsesRequest none;
  ASSERT_FALSE(parse({{"input", "x"}, {"tools", {kWeather}}, {"tool_choice", "none"}}, &none));
  EXPECT_FALSE(none.g.tool_calls);
  EXPECT_TRUE(none.g.grammar.empty());
  ResponsesRequest schema;
  const json format = {
      {"type", "json_schema"},
      {"name", "p"},
      {"strict", true},
      {"schema", {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}}}};
  ASSERT_FALSE(parse({{"input", "x"}, {"text", {{"format", format}}}}, &schema));
  EXPECT_EQ(schema.g.grammar_field, "text.format");
  EXPECT_FALSE(schema.g.grammar.empty());
  EXPECT_EQ(schema.settings["text"]["format"], format);
  EXPECT_EQ(refusal({{"input", "x"},
                     {"tools", {kWeather}},
                     {"tool_choice", {{"type", "function"}, {"name", "nope"}}}}),
            "tool_choice");
  json bad = format;
  bad["schema"] = {{"type", "array"}, {"uniqueItems", true}};
  EXPECT_EQ(refusal({{"input", "x"}, {"text", {{"format", bad}}}}), "text.format");
  EXPECT_EQ(refusal({{"input", "x"}, {"text", {{"format", {{"type", "yaml"}}}}}}),
            "text.format.type");
}

TEST(ResponsesProtocolTest, ReasoningEffortIsAThinkingControl) {
  ResponsesRequest off, low;
  ASSERT_FALSE(parse({{"input", "x"}, {"reasoning", {{"effort", "minimal"}}}}, &off));
  EXPECT_FALSE(off.g.thinking);
  ASSERT_FALSE(
      parse({{"input", "x"}, {"reasoning", {{"effort", "low"}, {"summary", "auto"}}}}, &low));
  EXPECT_TRUE(low.g.thinking);
  EXPECT_EQ(low.g.options.reasoning_budget, EffortBudgets{}.low);
  EXPECT_EQ(low.settings["reasoning"]["summary"], "auto");
  EXPECT_EQ(refusal({{"input", "x"}, {"reasoning", {{"effort", "extreme"}}}}), "reasoning.effort");
  EXPECT_EQ(refusal({{"input", "x"}, {"reasoning", {{"effort", "low"}}}, {"reasoning_budget", 4}}),
            "reasoning_budget");
  ResponsesRequest budget;
  ASSERT_FALSE(parse({{"input", "x"}, {"reasoning_budget", 4}}, &budget));
  EXPECT_EQ(budget.g.options.reasoning_budget, 4);
}

TEST(ResponsesProtocolTest, RefusalsNameTheField) {
  EXPECT_EQ(refusal({{"input", "x"}, {"frobnicate", 1}}), "frobnicate unknown_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"background", true}}), "background unsupported_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"background", false}}), "ok");
  EXPECT_EQ(refusal({{"input", "x"}, {"conversation", "conv_1"}}),
            "conversation unsupported_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"service_tier", "flex"}}),
            "service_tier unsupported_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"service_tier", "auto"}}), "ok");
  EXPECT_EQ(refusal({{"input", "x"}, {"include", {"reasoning.encrypted_content"}}}),
            "include unsupported_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"truncation", "auto"}}), "truncation unsupported_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"tools", {{{"type", "web_search_preview"}}}}}),
            "tools[0].type unsupported_parameter");
  EXPECT_EQ(refusal({{"input", "x"}, {"max_output_tokens", 0}}), "max_output_tokens");
  EXPECT_EQ(refusal({{"input", "x"}, {"temperature", "hot"}}), "temperature");
  EXPECT_EQ(refusal({{"input", "x"}, {"metadata", {{"k", 1}}}}), "metadata");
  EXPECT_EQ(refusal({{"model", "m"}}), "input");
  EXPECT_EQ(refusal({{"input", 3}}), "input");
  EXPECT_EQ(refusal({{"input", json::array()}}), "input");
  EXPECT_EQ(refusal({{"input", {{{"role", "tool"}, {"content", "x"}}}}}), "input[0].role");
  EXPECT_EQ(
      refusal(
          {{"input",
            {{{"role", "user"}, {"content", {{{"type", "input_image"}, {"image_url", "u"}}}}}}}}),
      "input[0].content[0].type unsupported_parameter");
  EXPECT_EQ(refusal({{"input", {{{"type", "web_search_call"}, {"id", "ws"}}}}}),
            "input[0].type unsupported_parameter");
  EXPECT_EQ(refusal({{"input", {{{"type", "function_call"}, {"call_id", "c"}, {"name", "f"}}}}}),
            "input[0].arguments");
  EXPECT_EQ(refusal({{"input", {{{"type", 5}}}}}), "input[0].type");
  EXPECT_EQ(refusal({{"input", "x"},
                     {"tools", {kWeather}},
                     {"text", {{"format", {{"type", "json_object"}}}}}}),
            "tools");
}

// The events of a streamed answer assemble into the items the answer gives whole, however it is
// split; with tools, calls become function_call items.
TEST(ResponsesOutputTest, StreamedEventsAssembleIntoTheSameItems) {
  const std::string answer =
      "\n\n<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
      "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  ResponseOutput whole("x", true);
  whole.reasoning("Think.");
  whole.content(answer);
  whole.finish(true);
  ASSERT_EQ(whole.items().size(), 2u);
  EXPECT_EQ(whole.items()[0]["type"], "reasoning");
  EXPECT_EQ(whole.items()[0]["summary"][0]["text"], "Think.");
  EXPECT_EQ(whole.items()[1]["type"], "function_call");
  EXPECT_EQ(whole.items()[1]["name"], "get_weather");
  EXPECT_EQ(json::parse(whole.items()[1]["arguments"].get<std::string>())["city"], "Paris");
  EXPECT_EQ(whole.items()[1]["status"], "completed");
  EXPECT_EQ(whole.n_calls(), 1);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<std::string> types;
    std::string args;
    json added;
    ResponseOutput streamed("x", true, [&](const std::string& type, json fields) {
      types.push_back(type);
      if (type == "response.function_call_arguments.delta") args += fields["delta"];
      if (type == "response.output_item.added") added.push_back(fields["item"]);
    });
    streamed.reasoning("Thi");
    streamed.reasoning("nk.");
    for (size_t pos = 0; pos < answer.size();) {
      const size_t n = std::min<size_t>(answer.size() - pos, 1 + rng() % 7);
      streamed.content(std::string_view(answer).substr(pos, n));
      pos += n;
    }
    streamed.finish(true);
    EXPECT_EQ(streamed.items(), whole.items());
    EXPECT_EQ(args, whole.items()[1]["arguments"]);
    ASSERT_EQ(added.size(), 2u);
    EXPECT_EQ(types.front(), "response.output_item.added");
    EXPECT_EQ(types[1], "response.reasoning_summary_part.added");
    EXPECT_EQ(types.back(), "response.output_item.done");
  }
  // Plain text cut by the token limit: a message left incomplete.
  ResponseOutput cut("y", false);
  cut.content("Hello");
  cut.finish(false);
  ASSERT_EQ(cut.items().size(), 1u);
  EXPECT_EQ(cut.items()[0]["status"], "incomplete");
  EXPECT_EQ(cut.items()[0]["content"][0]["text"], "Hello");
  EXPECT_EQ(cut.items()[0]["content"][0]["annotations"], json::array());
}

}  // namespace
}  // namespace ponder::server
