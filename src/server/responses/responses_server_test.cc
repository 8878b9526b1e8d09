// POST /v1/responses end to end: a real Server on a loopback port with the tiny model, over real
// sockets. Whole and streamed responses agree, stored responses are read back and deleted,
// previous_response_id carries a function call's result, text.format gives JSON following the
// schema, and refusals come in OpenAI's error shape.
#include <gtest/gtest.h>

#include "server/server_test_support.h"

namespace ponder::server {
namespace {

using Event = SseEvent;
std::vector<Event> events(const std::string& body) { return typed_sse_events(body); }

Reply post(uint16_t port, const json& body) { return server::post(port, "/v1/responses", body); }

// The tiny model without the response cache.
struct ResponsesFixture : Fixture {
  ResponsesFixture() : Fixture(uncached()) {}
};

// The texts of a response's output: "reasoning:...", "message:...", "call NAME:ARGS".
std::vector<std::string> texts(const json& output) {
  std::vector<std::string> out;
  for (const json& item : output) {
    if (item["type"] == "reasoning") {
      out.push_back("reasoning:" + item["summary"][0]["text"].get<std::string>());
    } else if (item["type"] == "message") {
      out.push_back("message:" + item["content"][0]["text"].get<std::string>());
    } else {
      out.push_back("call " + item["name"].get<std::string>() + ":" +
                    item["arguments"].get<std::string>());
    }
  }
  return out;
}

const json kWeather = json::parse(R"([{"type": "function", "name": "get_weather",
  "description": "Weather of a city", "strict": true, "parameters": {"type": "object",
  "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"],
  "additionalProperties": false}}])");

TEST(ResponsesServerTest, WholeAndStreamedAgreeAndStoredResponsesAreReadBack) {
  ResponsesFixture f;
  const json body = {{"model", "tiny"},
                     {"input", "What is two plus two?"},
                     {"instructions", "Answer briefly."},
                     {"max_output_tokens", 12},
                     {"temperature", 0},
                     {"metadata", {{"k", "v"}}}};
  const Reply r = post(f.port, body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = r.j();
  EXPECT_EQ(resp["object"], "response");
  EXPECT_EQ(resp["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(resp["model"], "tiny");
  EXPECT_EQ(resp["status"], "incomplete");  // 12 tokens: the random model is not done
  EXPECT_EQ(resp["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(resp["usage"]["output_tokens"], 12);
  EXPECT_EQ(resp["usage"]["total_tokens"], resp["usage"]["input_tokens"].get<int>() + 12);
  EXPECT_GT(resp["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 0);
  EXPECT_EQ(resp["instructions"], "Answer briefly.");
  EXPECT_EQ(resp["max_output_tokens"], 12);
  EXPECT_EQ(resp["metadata"]["k"], "v");
  EXPECT_EQ(resp["error"], nullptr);
  ASSERT_FALSE(resp["output"].empty());
  EXPECT_EQ(resp["output"][0]["type"], "reasoning");

  json streamed_body = body;
  streamed_body["stream"] = true;
  const Reply s = post(f.port, streamed_body);
  ASSERT_EQ(s.status, 200);
  const std::vector<Event> ev = events(s.body);
  ASSERT_GE(ev.size(), 6u) << s.body;
  EXPECT_EQ(ev[0].name, "response.created");
  EXPECT_EQ(ev[0].data["response"]["status"], "in_progress");
  EXPECT_EQ(ev[1].name, "response.in_progress");
  EXPECT_EQ(ev[2].name, "response.output_item.added");
  EXPECT_EQ(ev[3].name, "response.reasoning_summary_part.added");
  EXPECT_EQ(ev.back().name, "response.incomplete");
  std::string reasoning;
  for (size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].data["sequence_number"], i);
    if (ev[i].name == "response.reasoning_summary_text.delta")
      reasoning += ev[i].data["delta"].get<std::string>();
  }
  const json final_resp = ev.back().data["response"];
  EXPECT_EQ(texts(final_resp["output"]), texts(resp["output"]));  // greedy: the same answer
  EXPECT_EQ(final_resp["output"][0]["summary"][0]["text"], reasoning);
  EXPECT_EQ(final_resp["usage"]["output_tokens"], 12);

  // GET returns the stored response; DELETE removes it.
  const std::string id = resp["id"];
  const Reply got = call(f.port, http::verb::get, "/v1/responses/" + id);
  ASSERT_EQ(got.status, 200);
  EXPECT_EQ(got.j(), resp);
  const Reply in = call(f.port, http::verb::get, "/v1/responses/" + id + "/input_items");
  ASSERT_EQ(in.status, 200) << in.body;
  EXPECT_EQ(in.j()["object"], "list");
  ASSERT_EQ(in.j()["data"].size(), 1u);
  const json item = in.j()["data"][0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_EQ(item["role"], "user");
  EXPECT_EQ(item["content"],
            json::parse(R"([{"type": "input_text", "text": "What is two plus two?"}])"));
  EXPECT_EQ(item["id"].get<std::string>().rfind("msg_", 0), 0u);
  EXPECT_EQ(in.j()["first_id"], item["id"]);
  EXPECT_EQ(in.j()["has_more"], false);
  const Reply del = call(f.port, http::verb::delete_, "/v1/responses/" + id);
  EXPECT_EQ(del.status, 200);
  EXPECT_EQ(del.j()["deleted"], true);
  EXPECT_EQ(call(f.port, http::verb::get, "/v1/responses/" + id).status, 404);
  EXPECT_EQ(call(f.port, http::verb::delete_, "/v1/responses/" + id).status, 404);
  // store: false is not kept.
  json unstored = body;
  unstored["store"] = false;
  const Reply u = post(f.port, unstored);
  ASSERT_EQ(u.status, 200);
  EXPECT_EQ(u.j()["store"], false);
  EXPECT_EQ(call(f.port, http::verb::get, "/v1/responses/" + u.j()["id"].get<std::string>()).status,
            404);
}

TEST(ResponsesServerTest, AToolCallAndItsOutputThroughPreviousResponseId) {
  ResponsesFixture f;
  json body = {{"input", "Weather in Paris?"},
               {"tools", kWeather},
               {"tool_choice", "required"},
               {"max_output_tokens", 300},
               {"reasoning_budget", 4},
               {"temperature", 1.0},
               {"seed", 3}};
  const Reply r = post(f.port, body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json resp = r.j();
  EXPECT_EQ(resp["status"], "completed") << r.body;
  EXPECT_EQ(resp["tool_choice"], "required");
  EXPECT_EQ(resp["tools"][0]["name"], "get_weather");
  const json& call_item = resp["output"].back();
  ASSERT_EQ(call_item["type"], "function_call") << r.body;
  EXPECT_EQ(call_item["name"], "get_weather");
  EXPECT_EQ(call_item["status"], "completed");
  EXPECT_EQ(call_item["id"].get<std::string>().rfind("fc_", 0), 0u);
  EXPECT_EQ(call_item["call_id"].get<std::string>().rfind("call_", 0), 0u);
  const json args = json::parse(call_item["arguments"].get<std::string>());
  EXPECT_TRUE(args["city"].is_string());
  // Streamed: the call's events assemble into the same call.
  body["stream"] = true;
  const std::vector<Event> ev = events(post(f.port, body).body);
  std::string streamed_args, name;
  for (const Event& e : ev) {
    if (e.name == "response.function_call_arguments.delta") streamed_args += e.data["delta"];
    if (e.name == "response.function_call_arguments.done") name = e.data["name"];
  }
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(streamed_args), args);
  EXPECT_EQ(ev.back().name, "response.completed");
  // The result answers the call in the next turn.
  const json next = {{"previous_response_id", resp["id"]},
                     {"input",
                      {{{"type", "function_call_output"},
                        {"call_id", call_item["call_id"]},
                        {"output", "18 C, sunny"}}}},
                     {"tools", kWeather},
                     {"max_output_tokens", 8}};
  const Reply n = post(f.port, next);
  ASSERT_EQ(n.status, 200) << n.body;
  EXPECT_EQ(n.j()["previous_response_id"], resp["id"]);
  EXPECT_GT(n.j()["usage"]["input_tokens"].get<int>(), resp["usage"]["input_tokens"].get<int>());
  // A third turn sees both earlier ones (the call id is still known).
  json third = next;
  third["previous_response_id"] = n.j()["id"];
  EXPECT_EQ(post(f.port, third).status, 200);
  // Without previous_response_id: the call named by an item_reference to its stored item.
  const json by_reference = {
      {"input",
       {{{"role", "user"}, {"content", "Weather in Paris?"}},
        {{"type", "item_reference"}, {"id", call_item["id"]}},
        {{"type", "function_call_output"}, {"call_id", call_item["call_id"]}, {"output", "18 C"}}}},
      {"max_output_tokens", 4}};
  const Reply ref = post(f.port, by_reference);
  ASSERT_EQ(ref.status, 200) << ref.body;
  const Reply ref_items =
      call(f.port, http::verb::get,
           "/v1/responses/" + ref.j()["id"].get<std::string>() + "/input_items?order=asc");
  EXPECT_EQ(ref_items.j()["data"][1], call_item);  // stored resolved
  json dangling = by_reference;
  dangling["input"][1]["id"] = "fc_nothing";
  EXPECT_EQ(post(f.port, dangling).j()["error"]["param"], "input[1].id");
  json unmatched = next;
  unmatched["input"][0]["call_id"] = "call_unknown";
  const Reply bad = post(f.port, unmatched);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.j()["error"]["param"], "input[0].call_id");
}

TEST(ResponsesServerTest, TextFormatJsonSchemaGivesJsonFollowingTheSchema) {
  ResponsesFixture f;
  const json schema = json::parse(R"({"type": "object", "properties": {"name": {"type": "string",
    "maxLength": 6}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
    "required": ["name", "age"], "additionalProperties": false})");
  for (int seed = 0; seed < 3; ++seed) {
    const json body = {
        {"input", "Who?"},
        {"max_output_tokens", 300},
        {"reasoning_budget", 4},
        {"temperature", 1.0},
        {"seed", seed},
        {"text",
         {{"format",
           {{"type", "json_schema"}, {"name", "person"}, {"schema", schema}, {"strict", true}}}}}};
    const Reply r = post(f.port, body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json resp = r.j();
    EXPECT_EQ(resp["status"], "completed");
    EXPECT_EQ(resp["text"]["format"]["name"], "person");
    const json& msg = resp["output"].back();
    ASSERT_EQ(msg["type"], "message") << r.body;
    const json value = json::parse(msg["content"][0]["text"].get<std::string>());
    ASSERT_TRUE(value.is_object()) << r.body;
    EXPECT_TRUE(value["name"].is_string());
    EXPECT_LE(value["age"].get<int>(), 120);
    EXPECT_EQ(value.size(), 2u);
  }
}

// GET .../input_items: this turn's input, newest first unless order=asc, in pages (limit, after).
TEST(ResponsesServerTest, InputItemsAreListedInPages) {
  ResponsesFixture f;
  json input = json::array();
  for (const char* text : {"a", "b", "c"}) input.push_back({{"role", "user"}, {"content", text}});
  const Reply r = post(f.port, {{"input", input}, {"max_output_tokens", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string items = "/v1/responses/" + r.j()["id"].get<std::string>() + "/input_items";
  auto texts_of = [](const json& list) {
    std::string out;
    for (const json& item : list["data"]) out += item["content"][0]["text"].get<std::string>();
    return out;
  };
  const json page = call(f.port, http::verb::get, items + "?limit=2").j();
  EXPECT_EQ(texts_of(page), "cb");
  EXPECT_EQ(page["has_more"], true);
  const json rest =
      call(f.port, http::verb::get, items + "?limit=2&after=" + page["last_id"].get<std::string>())
          .j();
  EXPECT_EQ(texts_of(rest), "a");
  EXPECT_EQ(rest["has_more"], false);
  EXPECT_EQ(texts_of(call(f.port, http::verb::get, items + "?order=asc").j()), "abc");
  EXPECT_EQ(call(f.port, http::verb::get, items + "?limit=0").status, 400);
  EXPECT_EQ(call(f.port, http::verb::get, items + "?order=up").status, 400);
  EXPECT_EQ(call(f.port, http::verb::get, "/v1/responses/resp_x/input_items").status, 404);
}

// "Answer now" (POST /v1/answer_now with the response's id) ends a running response's thinking:
// the response then carries a message after its reasoning.
TEST(ResponsesServerTest, AnswerNowEndsTheThinkingOfARunningResponse) {
  ResponsesFixture f;
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), f.port));
  const std::string body = json{
      {"input", "Think for long"},
      {"max_output_tokens", 600},
      {"temperature", 0},
      {"ignore_eos", true},
      {"stream", true}}.dump();
  net::write(s, net::buffer("POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            "application/json\r\nConnection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got;
  char buf[4096];
  while (got.find("response.reasoning_summary_text.delta") == std::string::npos)
    got.append(buf, s.read_some(net::buffer(buf)));
  const size_t at = got.find("\"id\":\"resp_") + 6;
  const std::string id = got.substr(at, got.find('"', at) - at);
  const Reply now = call(f.port, http::verb::post, "/v1/answer_now", json{{"id", id}}.dump());
  EXPECT_EQ(now.status, 200) << now.body;
  beast::error_code ec;
  for (;;) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  const std::vector<Event> ev = events(got.substr(got.find("event: ")));
  ASSERT_FALSE(ev.empty());
  const json final_resp = ev.back().data["response"];
  EXPECT_EQ(final_resp["id"], id);
  ASSERT_GE(final_resp["output"].size(), 2u) << final_resp.dump();
  EXPECT_EQ(final_resp["output"][0]["type"], "reasoning");
  EXPECT_EQ(final_resp["output"][1]["type"], "message");
  EXPECT_LT(final_resp["usage"]["output_tokens_details"]["reasoning_tokens"].get<int>(), 600);
  EXPECT_EQ(call(f.port, http::verb::post, "/v1/answer_now", json{{"id", id}}.dump()).status,
            404);  // no longer running
}

TEST(ResponsesServerTest, RefusalsInOpenAisErrorShape) {
  ResponsesFixture f;
  auto refused = [&](const json& body) { return post(f.port, body); };
  Reply r = refused({{"input", "x"}, {"frobnicate", true}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["code"], "unknown_parameter");
  EXPECT_EQ(r.j()["error"]["param"], "frobnicate");
  EXPECT_EQ(r.j()["error"]["type"], "invalid_request_error");
  r = refused({{"input", "x"}, {"previous_response_id", "resp_nothing"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["code"], "previous_response_not_found");
  r = refused({{"input", "x"}, {"tools", {{{"type", "file_search"}}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["param"], "tools[0].type");
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("file_search"), std::string::npos);
  r = call(f.port, http::verb::post, "/v1/responses", "{nope");
  EXPECT_EQ(r.status, 400);
  r = refused({{"input", "x"}, {"max_output_tokens", 100000}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["code"], "context_length_exceeded");
  r = call(f.port, http::verb::get, "/v1/responses/resp_nothing");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("resp_nothing"), std::string::npos);
  EXPECT_EQ(call(f.port, http::verb::get, "/health").status, 200);  // still serving
}

}  // namespace
}  // namespace ponder::server
