// Anthropic's Messages API end to end: a real Server on a loopback port with the tiny model,
// talked to over real sockets. A whole message against the same request streamed (Anthropic's
// event sequence rebuilt into the same content), a forced tool call both ways, stop sequences,
// thinking disabled, count_tokens, and every refusal in Anthropic's error shape (the router's
// 404, 405 and 401 included).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "server/server_test_support.h"

namespace ponder::server {
namespace {

using Event = SseEvent;
std::vector<Event> events(const std::string& body) { return typed_sse_events(body); }

// The message a stream stands for, rebuilt as the SDK does; checks the order of the events on
// the way (start, blocks opened, filled and closed one at a time, delta, stop).
json rebuild(const std::vector<Event>& ev) {
  EXPECT_GE(ev.size(), 3u);
  if (ev.size() < 3) return nullptr;
  EXPECT_EQ(ev.front().name, "message_start");
  EXPECT_EQ(ev.back().name, "message_stop");
  json m = ev.front().data["message"];
  EXPECT_EQ(m["content"], json::array());
  EXPECT_TRUE(m["stop_reason"].is_null());
  int open = -1;
  std::string args;
  for (size_t i = 1; i + 1 < ev.size(); ++i) {
    const json& d = ev[i].data;
    if (ev[i].name == "ping") continue;
    if (ev[i].name == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block opened inside another";
      open = d["index"];
      EXPECT_EQ(open, static_cast<int>(m["content"].size()));
      m["content"].push_back(d["content_block"]);
      args.clear();
    } else if (ev[i].name == "content_block_delta") {
      EXPECT_EQ(d["index"], open);
      json& b = m["content"][static_cast<size_t>(open)];
      const json& delta = d["delta"];
      if (delta["type"] == "text_delta")
        b["text"] = b["text"].get<std::string>() + delta["text"].get<std::string>();
      if (delta["type"] == "thinking_delta")
        b["thinking"] = b["thinking"].get<std::string>() + delta["thinking"].get<std::string>();
      if (delta["type"] == "signature_delta") b["signature"] = delta["signature"];
      if (delta["type"] == "input_json_delta") args += delta["partial_json"].get<std::string>();
    } else if (ev[i].name == "content_block_stop") {
      EXPECT_EQ(d["index"], open);
      json& b = m["content"][static_cast<size_t>(open)];
      if (b["type"] == "tool_use") b["input"] = json::parse(args);
      open = -1;
    } else if (ev[i].name == "message_delta") {
      EXPECT_EQ(open, -1);
      m["stop_reason"] = d["delta"]["stop_reason"];
      m["stop_sequence"] = d["delta"]["stop_sequence"];
      m["usage"] = d["usage"];
    } else {
      ADD_FAILURE() << "unexpected event " << ev[i].name;
    }
  }
  return m;
}

// Every answer generated (no response cache), so streams and whole answers compare.
json ask(const std::string& text, int max_tokens) {
  return {{"model", "claude-sonnet-4-5"},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"messages", {{{"role", "user"}, {"content", text}}}}};
}

const json kWeather = {{"name", "get_weather"},
                       {"description", "The weather of a city"},
                       {"input_schema",
                        {{"type", "object"},
                         {"properties", {{"city", {{"type", "string"}, {"maxLength", 12}}}}},
                         {"required", {"city"}},
                         {"additionalProperties", false}}}};

void expect_anthropic_error(const Reply& r, int status, const std::string& type) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.body;
  EXPECT_EQ(j["type"], "error") << r.body;
  EXPECT_EQ(j["error"]["type"], type) << r.body;
  EXPECT_TRUE(j["error"]["message"].is_string());
}

TEST(AnthropicServerTest, WholeMessageAndTheSameStreamed) {
  Fixture f(uncached());
  const Reply whole = post(f.port, "/v1/messages", ask("What is two plus two?", 24));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json w = whole.j();
  EXPECT_EQ(w["type"], "message");
  EXPECT_EQ(w["role"], "assistant");
  EXPECT_EQ(w["model"], "tiny");
  EXPECT_EQ(w["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(whole.headers.at("request-id"), w["id"]);
  EXPECT_GT(w["usage"]["input_tokens"].get<int>(), 5);
  EXPECT_EQ(w["usage"]["cache_creation_input_tokens"], 0);
  const int n_out = w["usage"]["output_tokens"];
  EXPECT_GT(n_out, 0);
  EXPECT_TRUE(w["stop_reason"] == "max_tokens" || w["stop_reason"] == "end_turn") << w;
  if (w["stop_reason"] == "max_tokens") {
    EXPECT_EQ(n_out, 24);
  }
  EXPECT_TRUE(w["stop_sequence"].is_null());
  for (const json& b : w["content"]) {
    EXPECT_TRUE(b["type"] == "thinking" || b["type"] == "text") << b;
    if (b["type"] == "thinking") {
      EXPECT_EQ(b["signature"], "");
    }
  }

  json s = ask("What is two plus two?", 24);
  s["stream"] = true;
  const Reply streamed = post(f.port, "/v1/messages", s);
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  EXPECT_EQ(streamed.headers.at("Content-Type"), "text/event-stream");
  const std::vector<Event> ev = events(streamed.body);
  const json m = rebuild(ev);
  EXPECT_EQ(m["content"], w["content"]);  // greedy: the same answer, block for block
  EXPECT_EQ(m["stop_reason"], w["stop_reason"]);
  EXPECT_EQ(m["usage"]["output_tokens"], n_out);
  // The second run of the same prompt reuses its prefix from the KV cache: Anthropic counts
  // those tokens apart from input_tokens.
  EXPECT_GT(m["usage"]["cache_read_input_tokens"].get<int>(), 0);
  EXPECT_EQ(
      m["usage"]["input_tokens"].get<int>() + m["usage"]["cache_read_input_tokens"].get<int>(),
      w["usage"]["input_tokens"].get<int>() + w["usage"]["cache_read_input_tokens"].get<int>());
}

TEST(AnthropicServerTest, ThinkingDisabledHasNoThinkingBlock) {
  Fixture f(uncached());
  json b = ask("Hello", 16);
  b["thinking"] = {{"type", "disabled"}};
  const Reply r = post(f.port, "/v1/messages", b);
  ASSERT_EQ(r.status, 200) << r.body;
  const json w = r.j();  // kept: a range over a temporary's member would dangle
  ASSERT_FALSE(w["content"].empty()) << w;
  EXPECT_EQ(w["content"][0]["type"], "text");  // the tokens went to the answer
  for (const json& block : w["content"]) EXPECT_NE(block["type"], "thinking");
  b["stream"] = true;
  const json m = rebuild(events(post(f.port, "/v1/messages", b).body));
  EXPECT_EQ(m["content"], w["content"]);
}

// thinking.budget_tokens and output_config.effort cut the thinking where the OpenAI route's
// reasoning_budget does: the same thinking on both routes, and no more tokens of it.
TEST(AnthropicServerTest, ThinkingBudgetsCutTheThinkingAsOnTheOpenAiRoute) {
  ServerConfig c = uncached();
  c.defaults.efforts = {3, 6, -1};
  Fixture f(c);
  // thinking.budget_tokens (>= 1024 by Anthropic's rule) reaches the same reasoning_budget
  // (AnthropicProtocolTest); running 1,000 thinking tokens here would cost CI half a minute under
  // the sanitizers, so the budget's effect is checked through the effort's small one.
  std::vector<std::pair<json, int>> controls;
  json low = json::object();
  low["output_config"] = {{"effort", "low"}};
  controls.emplace_back(low, 3);
  for (const auto& [control, budget] : controls) {
    json b = ask("hi", 40);
    b.update(control);
    const Reply r = post(f.port, "/v1/messages", b);
    ASSERT_EQ(r.status, 200) << r.body;
    const json w = r.j();
    ASSERT_FALSE(w["content"].empty()) << w;
    const json& first = w["content"][0];
    const std::string thinking = first["type"] == "thinking" ? first["thinking"] : "";
    const Reply openai = post(f.port, "/v1/chat/completions",
                              {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                               {"max_tokens", 40},
                               {"temperature", 0},
                               {"reasoning_budget", budget}});
    ASSERT_EQ(openai.status, 200) << openai.body;
    const json chat = openai.j();
    EXPECT_LE(chat["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(),
              budget + 2);  // the budget, then "</think>" and the blank line
    EXPECT_EQ(thinking, chat["choices"][0]["message"].value("reasoning_content", "")) << control;
  }
}

TEST(AnthropicServerTest, ForcedToolCallWholeAndStreamed) {
  Fixture f(uncached());
  json b = ask("Weather in Paris?", 200);
  b["thinking"] = {{"type", "disabled"}};
  b["tools"] = json::array({kWeather});
  b["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
  const Reply r = post(f.port, "/v1/messages", b);
  ASSERT_EQ(r.status, 200) << r.body;
  const json w = r.j();
  EXPECT_EQ(w["stop_reason"], "tool_use") << w;
  const json& call = w["content"].back();
  EXPECT_EQ(call["type"], "tool_use");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["id"].get<std::string>().rfind("toolu_", 0), 0u);
  ASSERT_TRUE(call["input"].is_object());
  EXPECT_TRUE(call["input"]["city"].is_string()) << call;

  b["stream"] = true;
  const json m = rebuild(events(post(f.port, "/v1/messages", b).body));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  ASSERT_FALSE(m["content"].empty());
  EXPECT_EQ(m["content"].back()["input"], call["input"]);
  EXPECT_EQ(m["content"].back()["name"], "get_weather");

  // The round trip: the call and its result sent back are accepted.
  json next = ask("Weather in Paris?", 8);
  next["tools"] = json::array({kWeather});
  next["messages"].push_back({{"role", "assistant"}, {"content", w["content"]}});
  const json result = {
      {"type", "tool_result"}, {"tool_use_id", call["id"]}, {"content", "sunny, 21 C"}};
  next["messages"].push_back({{"role", "user"}, {"content", json::array({result})}});
  const Reply after = post(f.port, "/v1/messages", next);
  EXPECT_EQ(after.status, 200) << after.body;
}

TEST(AnthropicServerTest, OutputFormatGivesJsonText) {
  Fixture f(uncached());
  json b = ask("Is the sky blue?", 100);
  b["thinking"] = {{"type", "disabled"}};
  b["output_config"] = {{"format",
                         {{"type", "json_schema"},
                          {"schema",
                           {{"type", "object"},
                            {"properties", {{"ok", {{"type", "boolean"}}}}},
                            {"required", {"ok"}},
                            {"additionalProperties", false}}}}}};
  const json w = post(f.port, "/v1/messages", b).j();
  EXPECT_EQ(w["stop_reason"], "end_turn") << w;
  ASSERT_EQ(w["content"].size(), 1u) << w;
  const json answer = json::parse(w["content"][0]["text"].get<std::string>(), nullptr, false);
  ASSERT_TRUE(answer.is_object()) << w;
  EXPECT_TRUE(answer["ok"].is_boolean());
}

TEST(AnthropicServerTest, StopSequenceIsNamed) {
  Fixture f(uncached());
  json b = ask("Tell me a story", 24);
  b["thinking"] = {{"type", "disabled"}};
  const json w = post(f.port, "/v1/messages", b).j();
  ASSERT_FALSE(w["content"].empty()) << w;
  const std::string text = w["content"][0]["text"];
  // A character of the answer (ASCII, not its first) as the stop sequence: the answer ends before.
  size_t p = 1;
  while (p < text.size() && !std::isalnum(static_cast<unsigned char>(text[p]))) ++p;
  if (p >= text.size()) GTEST_SKIP() << "no ASCII letter in the tiny model's answer: " << text;
  const std::string stop = text.substr(p, 1);
  b["stop_sequences"] = {stop};
  const json s = post(f.port, "/v1/messages", b).j();
  EXPECT_EQ(s["stop_reason"], "stop_sequence") << s;
  EXPECT_EQ(s["stop_sequence"], stop);
  const std::string cut = s["content"].empty() ? "" : s["content"][0]["text"].get<std::string>();
  EXPECT_EQ(cut.find(stop), std::string::npos);
  EXPECT_EQ(text.rfind(cut, 0), 0u) << "the answer up to the stop sequence";
}

// A stream whose first token is slow to come (a long prompt, a slow prefill) gets Anthropic's
// ping events meanwhile, not OpenAI's comment lines.
TEST(AnthropicServerTest, SlowPrefillsSendPings) {
  ServerConfig c = uncached();
  c.keepalive_s = 0.02;
  c.engine.max_batch = 1;  // one prompt row per step: a slow prefill
  Fixture f(c);
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  json b = ask(long_text, 2);
  b["stream"] = true;
  const Reply r = post(f.port, "/v1/messages", b);
  const std::vector<Event> ev = events(r.body);
  const auto pings =
      std::count_if(ev.begin(), ev.end(), [](const Event& e) { return e.name == "ping"; });
  EXPECT_GE(pings, 2);  // the one after message_start, and keep-alives
  EXPECT_EQ(r.body.find(": keep-alive"), std::string::npos);
  EXPECT_EQ(rebuild(ev)["usage"]["output_tokens"], 2);
}

// A server that cannot take the work (draining here, a full queue likewise) answers Anthropic's
// overloaded_error, which the SDKs retry after Retry-After.
TEST(AnthropicServerTest, BusyIsOverloadedError) {
  Fixture f(uncached());
  EXPECT_TRUE(f.server->drain(5));
  const Reply r = post(f.port, "/v1/messages", ask("hi", 3));
  expect_anthropic_error(r, 503, "overloaded_error");
  EXPECT_EQ(r.headers.at("Retry-After"), "1");
}

TEST(AnthropicServerTest, CountTokensMatchesTheMessageUsage) {
  Fixture f(uncached());
  json b = ask("Count me", 4);
  const Reply r = post(f.port, "/v1/messages", b);
  ASSERT_EQ(r.status, 200) << r.body;
  b.erase("max_tokens");
  b.erase("temperature");
  const Reply c = post(f.port, "/v1/messages/count_tokens", b);
  ASSERT_EQ(c.status, 200) << c.body;
  const json u = r.j()["usage"];
  EXPECT_EQ(c.j()["input_tokens"].get<int>(),
            u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>());
  b["tools"] = json::array({kWeather});  // the tool list joins the prompt
  EXPECT_GT(post(f.port, "/v1/messages/count_tokens", b).j()["input_tokens"].get<int>(),
            c.j()["input_tokens"].get<int>());
}

TEST(AnthropicServerTest, RefusalsHaveAnthropicsShape) {
  ServerConfig c = uncached();
  c.access.api_key = "sekret";
  Fixture f(c);
  const std::vector<std::pair<std::string, std::string>> key = {{"x-api-key", "sekret"}};
  json no_max = ask("hi", 4);
  no_max.erase("max_tokens");
  expect_anthropic_error(post(f.port, "/v1/messages", no_max, key), 400, "invalid_request_error");
  EXPECT_EQ(post(f.port, "/v1/messages", no_max, key).j()["error"]["message"],
            "max_tokens: Field required");
  expect_anthropic_error(call(f.port, http::verb::post, "/v1/messages", "{", key), 400,
                         "invalid_request_error");
  json budget = ask("hi", 2000);
  budget["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2000}};
  expect_anthropic_error(post(f.port, "/v1/messages", budget, key), 400, "invalid_request_error");
  json orphan = ask("hi", 4);
  orphan["messages"] = {
      {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_nope"}}}}}};
  expect_anthropic_error(post(f.port, "/v1/messages", orphan, key), 400, "invalid_request_error");
  // The router's own refusals under /v1/messages: no key, wrong method, no such path.
  expect_anthropic_error(post(f.port, "/v1/messages", ask("hi", 4)), 401, "authentication_error");
  expect_anthropic_error(call(f.port, http::verb::get, "/v1/messages", "", key), 405,
                         "invalid_request_error");
  expect_anthropic_error(post(f.port, "/v1/messages/batches", ask("hi", 4), key), 404,
                         "not_found_error");
  // Other families keep their own shape.
  EXPECT_TRUE(post(f.port, "/v1/chat/completions", json::object()).j()["error"].contains("code"));
  // A prompt longer than the context: Anthropic's shape from the generation service too.
  expect_anthropic_error(post(f.port, "/v1/messages", ask("hi", 100000), key), 400,
                         "invalid_request_error");
  EXPECT_EQ(post(f.port, "/v1/messages", ask("hi", 2), key).status, 200);
}

}  // namespace
}  // namespace ponder::server
