// The server end to end: a real Server on a loopback port with a tiny real-format model, talked
// to over real sockets (a Boost.Beast client). Every route, the errors, streams against whole
// answers, several streams at once against each alone, the API key, CORS, a client that goes
// away mid-stream, a full queue, draining.
#include "server/server.h"

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "runtime/tiny_model_for_test.h"
#include "server/server_test_support.h"
#include "server/transport/http_server.h"
#include "server/transport/router.h"

namespace ponder::server {
namespace {

json chat(const std::string& user, int max_tokens, bool stream = false) {
  return {{"messages", {{{"role", "user"}, {"content", user}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0},
          {"stream", stream}};
}

// Reasoning and content of a streamed chat answer, and its finish reason.
struct Streamed {
  std::string reasoning, content, finish;
  json usage;
  bool done = false;
};
Streamed collect(const std::string& body) {
  Streamed s;
  for (const std::string& e : sse_events(body)) {
    if (e == "[DONE]") {
      s.done = true;
      continue;
    }
    const json c = json::parse(e);
    if (c.contains("usage") && !c["usage"].is_null()) s.usage = c["usage"];
    for (const auto& ch : c["choices"]) {
      const json& d = ch["delta"];
      if (d.contains("reasoning_content")) s.reasoning += d["reasoning_content"].get<std::string>();
      if (d.contains("content") && d["content"].is_string())
        s.content += d["content"].get<std::string>();
      if (!ch["finish_reason"].is_null()) s.finish = ch["finish_reason"];
    }
  }
  return s;
}

TEST(ServerTest, HealthModelsAndRouteErrors) {
  Fixture f;
  EXPECT_EQ(call(f.port, http::verb::get, "/health").j()["status"], "ok");
  const json models = call(f.port, http::verb::get, "/v1/models").j();
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  const Reply nf = call(f.port, http::verb::get, "/v1/nothing");
  EXPECT_EQ(nf.status, 404);
  EXPECT_EQ(nf.j()["error"]["type"], "not_found_error");
  const Reply na = call(f.port, http::verb::get, "/v1/chat/completions");
  EXPECT_EQ(na.status, 405);
  EXPECT_EQ(na.headers.at("Allow"), "POST");
}

TEST(ServerTest, BadRequestsGetA400ThatNamesTheField) {
  Fixture f;
  Reply r = call(f.port, http::verb::post, "/v1/chat/completions", "{not json");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("not valid JSON"), std::string::npos);
  json body = chat("hi", 4);
  body["temperature"] = "warm";
  r = post(f.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["param"], "temperature");
  body = chat("hi", 4);
  body["top_p"] = 1.5;  // out of range: refused, not clamped
  r = post(f.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["param"], "top_p");
  body = chat("hi", 4);
  body["tools"] = json::array({{{"type", "function"}}});
  r = post(f.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["param"], "tools[0].function");
  body = chat("hi", 4);
  body["audio"] = json::object();
  r = post(f.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["code"], "unsupported_parameter");
  body = chat("hi", 4);
  body["some_future_field"] = 1;  // unknown fields are ignored
  EXPECT_EQ(post(f.port, "/v1/chat/completions", body).status, 200);
  body = chat("hi", 100000);
  r = post(f.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["code"], "context_length_exceeded");
  EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("100000 to generate"),
            std::string::npos);
  r = post(f.port, "/v1/chat/completions", {{"messages", json::array()}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["param"], "messages");
}

TEST(ServerTest, LimitsGive413And414) {
  ServerConfig c;
  c.limits.max_body_bytes = 1000;
  Fixture f(c);
  const Reply big = call(f.port, http::verb::post, "/v1/chat/completions", std::string(5000, ' '));
  EXPECT_EQ(big.status, 413);
  const Reply uri = call(f.port, http::verb::get, "/health?" + std::string(9000, 'a'));
  EXPECT_EQ(uri.status, 414);
  EXPECT_EQ(call(f.port, http::verb::get, "/health").status, 200);  // still serving
}

TEST(ServerTest, AStreamSaysWhatTheWholeAnswerSays) {
  ServerConfig c;
  c.response_cache = false;  // the stream is computed, not replayed
  Fixture f(c);
  const json whole = post(f.port, "/v1/chat/completions", chat("What is 2+2?", 24)).j();
  const Reply sr = post(f.port, "/v1/chat/completions", [] {
    json b = chat("What is 2+2?", 24, true);
    b["stream_options"] = {{"include_usage", true}};
    return b;
  }());
  EXPECT_EQ(sr.status, 200);
  EXPECT_EQ(sr.headers.at("Content-Type"), "text/event-stream");
  const Streamed s = collect(sr.body);
  EXPECT_TRUE(s.done);
  const json& msg = whole["choices"][0]["message"];
  EXPECT_EQ(s.reasoning, msg.value("reasoning_content", ""));
  EXPECT_EQ(s.content, msg["content"].get<std::string>());
  EXPECT_EQ(s.finish, whole["choices"][0]["finish_reason"]);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 24);
  EXPECT_EQ(s.usage["completion_tokens"], 24);
  // The same prompt again: its prefix came from the cache.
  EXPECT_GT(s.usage["prompt_tokens_details"]["cached_tokens"].get<int>(), 0);
  EXPECT_EQ(s.usage["completion_tokens_details"]["reasoning_tokens"],
            whole["usage"]["completion_tokens_details"]["reasoning_tokens"]);
}

TEST(ServerTest, CompletionsWithLogprobsAndChoices) {
  Fixture f;
  const json r = post(f.port, "/v1/completions",
                      {{"prompt", "Once upon a time"},
                       {"max_tokens", 6},
                       {"temperature", 0},
                       {"logprobs", 3},
                       {"n", 2}})
                     .j();
  ASSERT_EQ(r["choices"].size(), 2u);
  EXPECT_EQ(r["object"], "text_completion");
  for (const auto& ch : r["choices"]) {
    EXPECT_EQ(ch["text"], r["choices"][0]["text"]);  // greedy: both choices agree
    ASSERT_EQ(ch["logprobs"]["tokens"].size(), 6u);
    EXPECT_EQ(ch["logprobs"]["top_logprobs"][0].size(), 3u);
    EXPECT_LE(ch["logprobs"]["token_logprobs"][0].get<double>(), 0.0);
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 12);
  const json c = post(f.port, "/v1/chat/completions",
                      [] {
                        json b = chat("hi", 3);
                        b["logprobs"] = true;
                        b["top_logprobs"] = 2;
                        return b;
                      }())
                     .j();
  const json& lp = c["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(lp.size(), 3u);
  EXPECT_EQ(lp[0]["top_logprobs"].size(), 2u);
  EXPECT_TRUE(lp[0]["bytes"].is_array());
}

TEST(ServerTest, FourStreamsAtOnceEachAsAlone) {
  ServerConfig c;
  c.response_cache = false;  // every answer computed: alone, then beside three others
  Fixture f(c);
  std::vector<std::string> alone;
  for (int i = 0; i < 4; ++i)
    alone.push_back(collect(post(f.port, "/v1/chat/completions",
                                 chat("question " + std::to_string(i), 20, true))
                                .body)
                        .reasoning);
  std::vector<std::future<std::string>> together;
  for (int i = 0; i < 4; ++i) {
    together.push_back(std::async(std::launch::async, [&, i] {
      return collect(post(f.port, "/v1/chat/completions",
                          chat("question " + std::to_string(i), 20, true))
                         .body)
          .reasoning;
    }));
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(together[i].get(), alone[i]) << i;
}

TEST(ServerTest, ApiKeyAndCors) {
  ServerConfig c;
  c.access.api_key = "sekret";
  c.access.cors_origins = {"http://allowed.example"};
  Fixture f(c);
  EXPECT_EQ(call(f.port, http::verb::get, "/v1/models").status, 401);
  EXPECT_EQ(
      call(f.port, http::verb::get, "/v1/models", "", {{"Authorization", "Bearer wrong"}}).status,
      401);
  EXPECT_EQ(
      call(f.port, http::verb::get, "/v1/models", "", {{"Authorization", "Bearer sekret"}}).status,
      200);
  EXPECT_EQ(call(f.port, http::verb::get, "/health").status, 200);  // probes need no key
  const Reply ok =
      call(f.port, http::verb::get, "/health", "", {{"Origin", "http://allowed.example"}});
  EXPECT_EQ(ok.headers.at("Access-Control-Allow-Origin"), "http://allowed.example");
  const Reply no =
      call(f.port, http::verb::get, "/health", "", {{"Origin", "http://evil.example"}});
  EXPECT_EQ(no.headers.count("Access-Control-Allow-Origin"), 0u);
  const Reply pre = call(f.port, http::verb::options, "/v1/chat/completions", "",
                         {{"Origin", "http://allowed.example"}});
  EXPECT_EQ(pre.status, 204);
  EXPECT_NE(pre.headers.at("Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);
  // An SDK's own headers (Anthropic's, openai's x-stainless-*) are allowed when the preflight
  // asks for them from an allowed origin, never for another origin.
  const std::string asked = "anthropic-version, x-api-key, x-stainless-os";
  const Reply sdk =
      call(f.port, http::verb::options, "/v1/messages", "",
           {{"Origin", "http://allowed.example"}, {"Access-Control-Request-Headers", asked}});
  EXPECT_EQ(sdk.headers.at("Access-Control-Allow-Headers"), asked);
  const Reply evil =
      call(f.port, http::verb::options, "/v1/messages", "",
           {{"Origin", "http://evil.example"}, {"Access-Control-Request-Headers", asked}});
  EXPECT_EQ(evil.headers.count("Access-Control-Allow-Headers"), 0u);
}

TEST(ServerTest, AClientThatLeavesCancelsItsRequest) {
  Fixture f;
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), f.port));
  const std::string body = chat("tell me a long story", 1500, true).dump();
  const std::string req =
      "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
  net::write(s, net::buffer(req));
  char buf[4096];
  size_t got = 0;
  while (got < 2000) got += s.read_some(net::buffer(buf));  // a few chunks: it is decoding
  s.close();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (f.server->engine().metrics().total.requests_cancelled == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  const EngineMetrics m = f.server->engine().metrics();
  EXPECT_EQ(m.total.requests_cancelled, 1);
  EXPECT_LT(m.total.generated_tokens, 1500);
  EXPECT_EQ(call(f.port, http::verb::get, "/health").status, 200);
}

TEST(ServerTest, AFullQueueAnswers503WithRetryAfter) {
  ServerConfig c;
  c.engine.max_running = 1;
  c.engine.max_queue = 1;
  c.engine.max_batch = 2;  // slow prefill: the first request holds the engine
  Fixture f(c);
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  auto first = std::async(std::launch::async,
                          [&] { return post(f.port, "/v1/chat/completions", chat(long_text, 2)); });
  while (f.server->engine().metrics().sequences_running == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto second = std::async(std::launch::async,
                           [&] { return post(f.port, "/v1/chat/completions", chat("b", 2)); });
  while (f.server->engine().metrics().requests_waiting == 0 &&
         second.wait_for(std::chrono::milliseconds(0)) != std::future_status::ready) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const Reply third = post(f.port, "/v1/chat/completions", chat("c", 2));
  EXPECT_EQ(third.status, 503);
  EXPECT_EQ(third.headers.at("Retry-After"), "1");
  EXPECT_EQ(first.get().status, 200);
  EXPECT_EQ(second.get().status, 200);
}

TEST(ServerTest, TokenizeDetokenizePropsMetrics) {
  Fixture f;
  const json t = post(f.port, "/tokenize", {{"content", "Hello world"}, {"with_pieces", true}}).j();
  ASSERT_FALSE(t["tokens"].empty());
  json ids = json::array();
  std::string joined;
  for (const auto& x : t["tokens"]) {
    ids.push_back(x["id"]);
    joined += x["piece"].get<std::string>();
  }
  EXPECT_EQ(joined, "Hello world");
  EXPECT_EQ(post(f.port, "/detokenize", {{"tokens", ids}}).j()["content"], "Hello world");
  EXPECT_EQ(post(f.port, "/detokenize", {{"tokens", {-1}}}).status, 400);
  EXPECT_EQ(call(f.port, http::verb::get, "/props").j()["default_generation_settings"]["n_ctx"],
            2048);
  post(f.port, "/v1/chat/completions", chat("hi", 3));
  // The engine counts a step's tokens once the step ends, which may be after the answer went out.
  std::string metrics;
  for (int i = 0; i < 500; ++i) {
    metrics = call(f.port, http::verb::get, "/metrics").body;
    if (metrics.find("llamacpp:tokens_predicted_total 3") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(metrics.find("llamacpp:tokens_predicted_total 3"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("# TYPE llamacpp:prompt_tokens_total counter"), std::string::npos);
  EXPECT_NE(metrics.find("ponder_time_to_first_token_seconds_bucket{le=\"+Inf\"} 1"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("ponder_time_to_first_token_seconds_count 1"), std::string::npos);
  const json slots = call(f.port, http::verb::get, "/slots").j();
  EXPECT_EQ(slots.size(), 8u);
  EXPECT_EQ(slots[0]["n_ctx"], 2048);
}

TEST(ServerTest, LlamaCppCompletionWholeAndStreamed) {
  Fixture f;
  const json whole =
      post(f.port, "/completion",
           {{"prompt", "Once upon a time"}, {"n_predict", 6}, {"temperature", 0}, {"n_probs", 2}})
          .j();
  EXPECT_EQ(whole["tokens_predicted"], 6);
  EXPECT_EQ(whole["stop_type"], "limit");
  EXPECT_EQ(whole["timings"]["predicted_n"], 6);
  ASSERT_EQ(whole["completion_probabilities"].size(), 6u);
  EXPECT_EQ(whole["completion_probabilities"][0]["top_logprobs"].size(), 2u);
  const Reply sr = post(
      f.port, "/completion",
      {{"prompt", "Once upon a time"}, {"n_predict", 6}, {"temperature", 0}, {"stream", true}});
  std::string text;
  json last;
  for (const std::string& e : sse_events(sr.body)) {
    last = json::parse(e);
    text += last["content"].get<std::string>();
  }
  EXPECT_TRUE(last["stop"].get<bool>());
  EXPECT_EQ(last["timings"]["predicted_n"], 6);
  EXPECT_EQ(text, whole["content"].get<std::string>());
  EXPECT_EQ(post(f.port, "/completion", {{"prompt", "x"}, {"n_predict", -2}}).status, 400);
}

TEST(ServerTest, OllamaChatStreamsNdjsonWithThinking) {
  Fixture f;
  const json msgs = {{{"role", "user"}, {"content", "Why?"}}};
  const json opts = {{"temperature", 0}, {"num_predict", 12}};
  const json whole =
      post(f.port, "/api/chat",
           {{"model", "tiny"}, {"messages", msgs}, {"stream", false}, {"options", opts}})
          .j();
  EXPECT_TRUE(whole["done"].get<bool>());
  EXPECT_EQ(whole["eval_count"], 12);
  EXPECT_EQ(whole["done_reason"], "length");
  const Reply sr =
      post(f.port, "/api/chat",
           {{"model", "tiny"}, {"messages", msgs}, {"options", opts}});  // streams by default
  EXPECT_EQ(sr.headers.at("Content-Type"), "application/x-ndjson");
  std::string thinking, content;
  json last;
  size_t pos = 0, nl;
  while ((nl = sr.body.find('\n', pos)) != std::string::npos) {
    last = json::parse(sr.body.substr(pos, nl - pos));
    thinking += last["message"].value("thinking", "");
    content += last["message"]["content"].get<std::string>();
    pos = nl + 1;
  }
  EXPECT_TRUE(last["done"].get<bool>());
  EXPECT_EQ(thinking, whole["message"].value("thinking", ""));
  EXPECT_EQ(content, whole["message"]["content"].get<std::string>());
  const json gen =
      post(f.port, "/api/generate", {{"prompt", "Why?"}, {"stream", false}, {"options", opts}}).j();
  EXPECT_EQ(gen.value("thinking", ""),
            whole["message"].value("thinking", ""));  // same rendered prompt
  EXPECT_EQ(call(f.port, http::verb::get, "/api/tags").j()["models"][0]["name"], "tiny:latest");
  const json show = post(f.port, "/api/show", {{"model", "tiny"}}).j();
  EXPECT_NE(std::find(show["capabilities"].begin(), show["capabilities"].end(), "thinking"),
            show["capabilities"].end());
  EXPECT_TRUE(call(f.port, http::verb::get, "/api/version").j().contains("version"));
  const Reply bad = post(f.port, "/api/chat", {{"messages", "x"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_TRUE(bad.j()["error"].is_string());
}

std::string temp_dir(const std::string& name) {
  const std::string d = std::string(PONDER_BINARY_DIR) + "/server_test_tmp/" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// A deterministic request answered twice: the second comes from the cache, identical field for
// field (stream and whole), marked as cached, with no engine work; and it survives a restart.
TEST(ServerTest, ResponseCacheReplaysIdenticalAnswersAcrossARestart) {
  ServerConfig c;
  c.cache_dir = temp_dir("cache");
  c.fingerprint = "test-model";
  json body = chat("What is 2+2?", 16);
  body["logprobs"] = true;
  body["top_logprobs"] = 2;
  json fresh;
  std::string fresh_stream;
  {
    Fixture f(c);
    const Reply a = post(f.port, "/v1/chat/completions", body);
    EXPECT_EQ(a.headers.at("X-Ponder-Cache"), "miss");
    fresh = a.j();
    // (The engine counts a step's tokens after the step, possibly after the answer went out.)
    for (int i = 0; i < 1000 && f.server->engine().metrics().total.generated_tokens < 16; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const int64_t generated = f.server->engine().metrics().total.generated_tokens;
    ASSERT_EQ(generated, 16);
    const Reply b = post(f.port, "/v1/chat/completions", body);
    EXPECT_EQ(b.headers.at("X-Ponder-Cache"), "hit");
    const json cached = b.j();
    EXPECT_EQ(cached["choices"], fresh["choices"]);
    EXPECT_EQ(cached["usage"]["completion_tokens"], fresh["usage"]["completion_tokens"]);
    EXPECT_TRUE(cached["usage"]["response_cached"].get<bool>());
    EXPECT_EQ(f.server->engine().metrics().total.generated_tokens, generated);  // no engine work
    json sb = body;
    sb["stream"] = true;
    sb["cache"] = false;
    fresh_stream = collect(post(f.port, "/v1/chat/completions", sb).body).reasoning;
    sb["cache"] = true;
    EXPECT_EQ(collect(post(f.port, "/v1/chat/completions", sb).body).reasoning, fresh_stream);
    // Sampling without a seed is never cached; with a seed it is.
    json hot = chat("What is 2+2?", 8);
    hot["temperature"] = 0.9;
    EXPECT_EQ(post(f.port, "/v1/chat/completions", hot).headers.at("X-Ponder-Cache"), "off");
    hot["seed"] = 5;
    const Reply s1 = post(f.port, "/v1/chat/completions", hot);
    const Reply s2 = post(f.port, "/v1/chat/completions", hot);
    EXPECT_EQ(s2.headers.at("X-Ponder-Cache"), "hit");
    EXPECT_EQ(s1.j()["choices"], s2.j()["choices"]);
    ASSERT_TRUE(f.server->cache() != nullptr);
    f.server->cache()->flush();
  }
  Fixture again(c);  // a new process would see the same file
  const Reply r = post(again.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.headers.at("X-Ponder-Cache"), "hit");
  EXPECT_EQ(r.j()["choices"], fresh["choices"]);
  // Another model's fingerprint never matches.
  ServerConfig other = c;
  other.fingerprint = "another-model";
  Fixture third(other);
  EXPECT_EQ(post(third.port, "/v1/chat/completions", body).headers.at("X-Ponder-Cache"), "miss");
}

// A damaged cache file is moved aside and rebuilt; an unusable directory leaves the cache in
// memory; either way every request is answered.
TEST(ServerTest, ABrokenCacheNeverFailsARequest) {
  ServerConfig c;
  c.cache_dir = temp_dir("broken");
  {
    std::ofstream out(c.cache_dir + "/responses.sqlite", std::ios::binary);
    out << std::string(8192, 'x');  // not a database
  }
  {
    Fixture f(c);
    EXPECT_EQ(post(f.port, "/v1/chat/completions", chat("hi", 4)).status, 200);
    EXPECT_EQ(post(f.port, "/v1/chat/completions", chat("hi", 4)).headers.at("X-Ponder-Cache"),
              "hit");
    EXPECT_TRUE(f.server->cache()->stats().disk_enabled);
    EXPECT_GE(f.server->cache()->stats().errors, 1);
  }
  bool moved_aside = false;
  for (const auto& e : std::filesystem::directory_iterator(c.cache_dir)) {
    moved_aside |= e.path().filename().string().find("responses.sqlite.corrupt-") == 0;
  }
  EXPECT_TRUE(moved_aside);
  ServerConfig blocked;
  blocked.cache_dir = temp_dir("blocked") + "/a-file";
  { std::ofstream(blocked.cache_dir) << "a file where the directory should be"; }
  Fixture g(blocked);
  EXPECT_EQ(post(g.port, "/v1/chat/completions", chat("hi", 4)).status, 200);
  EXPECT_EQ(post(g.port, "/v1/chat/completions", chat("hi", 4)).headers.at("X-Ponder-Cache"),
            "hit");  // memory
  EXPECT_FALSE(g.server->cache()->stats().disk_enabled);
  EXPECT_NE(
      call(g.port, http::verb::get, "/metrics").body.find("ponder_response_cache_disk_enabled 0"),
      std::string::npos);
}

// R1's thinking cut short over HTTP: a reasoning budget, and "answer now" on a running stream by
// the id its chunks carry. An answer cut by a click is not cached; one cut by a budget is.
TEST(ServerTest, ReasoningBudgetAndAnswerNow) {
  Fixture f;
  json b = chat("Think about it", 24);
  b["reasoning_budget"] = 4;
  b["ignore_eos"] = true;
  const json r = post(f.port, "/v1/chat/completions", b).j();
  EXPECT_EQ(r["usage"]["completion_tokens_details"]["reasoning_tokens"],
            5);  // 4 + the forced </think>
  EXPECT_FALSE(r["choices"][0]["message"]["content"].get<std::string>().empty());
  EXPECT_EQ(post(f.port, "/v1/chat/completions", b).headers.at("X-Ponder-Cache"), "hit");
  EXPECT_EQ(post(f.port, "/v1/answer_now", {{"id", "chatcmpl-unknown"}}).status, 404);
  // A long stream, read as it comes; answer now once it has started.
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), f.port));
  json lb = chat("Think for long", 600, true);
  lb["ignore_eos"] = true;
  const std::string body = lb.dump();
  net::write(s, net::buffer("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                            "application/json\r\nConnection: close\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body));
  std::string got;
  char buf[4096];
  beast::error_code ec;
  while (got.find("\"id\":\"chatcmpl-") == std::string::npos)
    got.append(buf, s.read_some(net::buffer(buf)));
  const size_t at = got.find("\"id\":\"chatcmpl-") + 6;
  const std::string id = got.substr(at, got.find('"', at) - at);
  const Reply now = post(f.port, "/v1/answer_now", {{"id", id}});
  EXPECT_EQ(now.status, 200) << now.body;
  for (;;) {
    const size_t n = s.read_some(net::buffer(buf), ec);
    if (ec) break;
    got.append(buf, n);
  }
  bool answered = false;  // some chunk carries answer text (not only the first chunk's "")
  for (size_t p = got.find("\"content\":\""); p != std::string::npos;
       p = got.find("\"content\":\"", p + 1)) {
    answered |= got[p + 11] != '"';
  }
  EXPECT_TRUE(answered);
  EXPECT_NE(got.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(post(f.port, "/v1/chat/completions", lb).headers.at("X-Ponder-Cache"),
            "miss");  // never stored
}

// A stream whose first token is slow to come (a long prompt behind a slow prefill) gets SSE
// comment lines meanwhile.
TEST(ServerTest, SlowPrefillsSendKeepAliveComments) {
  ServerConfig c;
  c.keepalive_s = 0.02;
  c.engine.max_batch = 1;  // one prompt row per step: a slow prefill
  c.response_cache = false;
  Fixture f(c);
  std::string long_text;
  for (int i = 0; i < 300; ++i) long_text += "word" + std::to_string(i) + " ";
  const Reply r = post(f.port, "/v1/chat/completions", chat(long_text, 2, true));
  EXPECT_NE(r.body.find(": keep-alive\n\n"), std::string::npos);
  EXPECT_TRUE(collect(r.body).done);
}

// --cache-match: normalized ignores case and spacing; similar also takes reordered, reworded
// (filler words) questions, says which cached question it answered, and refuses a changed number.
TEST(ServerTest, CacheMatchNormalizedAndSimilar) {
  ServerConfig c;
  c.cache_dir = temp_dir("similar");
  c.cache_match = CacheMatch::kSimilar;
  Fixture f(c);
  const json first =
      post(f.port, "/v1/chat/completions", chat("What is the capital of France?", 8)).j();
  f.server->cache()->flush();
  const Reply norm =
      post(f.port, "/v1/chat/completions", chat("  what IS the capital of   france?", 8));
  EXPECT_EQ(norm.headers.at("X-Ponder-Cache"), "hit");
  EXPECT_EQ(norm.j()["choices"], first["choices"]);
  const Reply sim = post(f.port, "/v1/chat/completions",
                         chat("Please tell me, the capital of France is what?", 8));
  EXPECT_EQ(sim.headers.at("X-Ponder-Cache"), "hit");
  EXPECT_EQ(sim.j()["usage"]["response_cached_question"], "What is the capital of France?");
  EXPECT_EQ(post(f.port, "/v1/chat/completions", chat("What is the capital of Spain?", 8))
                .headers.at("X-Ponder-Cache"),
            "miss");
  const json sum = post(f.port, "/v1/chat/completions", chat("What is 2+2?", 8)).j();
  f.server->cache()->flush();
  EXPECT_EQ(
      post(f.port, "/v1/chat/completions", chat("What is 2+3?", 8)).headers.at("X-Ponder-Cache"),
      "miss");
  // Another system prompt is another context: no match.
  json other = chat("What is the capital of France?", 8);
  other["messages"].insert(other["messages"].begin(),
                           json{{"role", "system"}, {"content", "Answer in French."}});
  EXPECT_EQ(post(f.port, "/v1/chat/completions", other).headers.at("X-Ponder-Cache"), "miss");
}

// llama.cpp's return_progress: prompt_progress chunks before the first token, in both families.
TEST(ServerTest, ReturnProgressStreamsPromptProgress) {
  ServerConfig c;
  c.engine.max_batch = 32;
  c.response_cache = false;
  Fixture f(c);
  std::string long_text;
  for (int i = 0; i < 200; ++i) long_text += "word" + std::to_string(i) + " ";
  json b = chat(long_text, 2, true);
  b["return_progress"] = true;
  const Reply r = post(f.port, "/v1/chat/completions", b);
  json last_progress;
  int n_progress = 0;
  for (const std::string& e : sse_events(r.body)) {
    if (e == "[DONE]") continue;
    const json j = json::parse(e);
    if (j.contains("prompt_progress")) {
      last_progress = j["prompt_progress"];
      n_progress++;
    }
  }
  EXPECT_GE(n_progress, 2);
  EXPECT_EQ(last_progress["processed"], last_progress["total"]);
  EXPECT_TRUE(collect(r.body).done);
  const Reply lc =
      post(f.port, "/completion",
           {{"prompt", long_text}, {"n_predict", 2}, {"stream", true}, {"return_progress", true}});
  EXPECT_NE(lc.body.find("\"prompt_progress\""), std::string::npos);
  const Reply none = post(f.port, "/v1/chat/completions", chat(long_text + "x", 2, true));
  EXPECT_EQ(none.body.find("prompt_progress"), std::string::npos);  // only when asked
}

TEST(ServerTest, DrainingFailsHealthAndRefusesNewWork) {
  Fixture f;
  EXPECT_EQ(call(f.port, http::verb::get, "/health/ready").status, 200);
  EXPECT_TRUE(f.server->drain(5));
  EXPECT_EQ(call(f.port, http::verb::get, "/health").status, 503);
  EXPECT_EQ(call(f.port, http::verb::get, "/health/ready").status,
            503);  // a load balancer stops sending work
  const Reply live = call(f.port, http::verb::get, "/health/live");  // but nothing restarts it
  EXPECT_EQ(live.status, 200);
  EXPECT_EQ(live.j()["state"], "draining");
  const Reply r = post(f.port, "/v1/chat/completions", chat("hi", 3));
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers.at("Retry-After"), "1");
}

TEST(ServerTest, AReplicaNamesItselfAndReturnsTheRouteKey) {
  ServerConfig c;
  c.replica_id = "r2";
  Fixture f(c);
  EXPECT_EQ(call(f.port, http::verb::get, "/health").headers.at("X-Ponder-Replica"), "r2");
  EXPECT_EQ(call(f.port, http::verb::get, "/no/such/route").headers.at("X-Ponder-Replica"), "r2");
  const json turn1 = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
      {"max_tokens", 2},
      {"temperature", 0}};
  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", "Hello"}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "Why?"}});
  const Reply a = post(f.port, "/v1/chat/completions", turn1);
  const Reply b = post(f.port, "/v1/chat/completions", turn2);
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.headers.at("X-Ponder-Route-Key"), b.headers.at("X-Ponder-Route-Key"));
  EXPECT_EQ(a.headers.at("X-Ponder-Route-Key").rfind("h-", 0), 0u);
  EXPECT_EQ(a.j()["id"].get<std::string>().rfind("chatcmpl-r2-", 0),
            0u);  // the id names its replica
  const Reply header =
      post(f.port, "/v1/chat/completions", turn1, {{"X-Conversation-Id", "conv-7"}});
  EXPECT_EQ(header.headers.at("X-Ponder-Route-Key"), "conv-7");
  json keyed = turn1;
  keyed["prompt_cache_key"] = "shared-prompt";
  EXPECT_EQ(post(f.port, "/v1/chat/completions", keyed).headers.at("X-Ponder-Route-Key"),
            "shared-prompt");
  const Reply ollama = post(f.port, "/api/chat",
                            {{"model", "tiny"},
                             {"messages", turn1["messages"]},
                             {"stream", false},
                             {"options", {{"num_predict", 2}}}},
                            {{"X-Conversation-Id", "conv-8"}});
  EXPECT_EQ(ollama.headers.at("X-Ponder-Route-Key"), "conv-8");
}

// A handler that throws (a bug) gets its client a 500 in OpenAI's error shape, or its started
// stream ended, and the server goes on serving.
TEST(ServerTest, AThrowingHandlerIsA500AndTheServerGoesOn) {
  Router router(AccessConfig{});
  router.add(http::verb::get, "/throw",
             [](HttpRequest&&, std::shared_ptr<Responder>) { throw std::runtime_error("boom"); });
  router.add(http::verb::get, "/throw-mid-stream", [](HttpRequest&&, std::shared_ptr<Responder> r) {
    r->start_stream(200, "text/plain");
    r->write("partial");
    (void)nlohmann::json("x").get<bool>();  // throws type_error
  });
  router.add(http::verb::get, "/ok",
             [](HttpRequest&&, std::shared_ptr<Responder> r) { r->send(200, "text/plain", "ok"); });
  HttpServer server(HttpLimits{}, [&router](HttpRequest&& q, std::shared_ptr<Responder> r) {
    router.handle(std::move(q), std::move(r));
  });
  ASSERT_TRUE(server.listen("127.0.0.1", 0).is_ok());
  server.start();
  Reply a = call(server.port(), http::verb::get, "/throw");
  EXPECT_EQ(a.status, 500);
  EXPECT_EQ(a.j()["error"]["message"], "internal error: boom");
  Reply b = call(server.port(), http::verb::get, "/throw-mid-stream");
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(b.body, "partial");
  EXPECT_EQ(call(server.port(), http::verb::get, "/ok").body, "ok");
}

}  // namespace
}  // namespace ponder::server

namespace ponder::server {
namespace {

// Structured outputs on every API family: R1 thinks (a small budget), then answers JSON that
// follows the schema, whole and streamed alike; a malformed grammar is a 400 naming its field.
TEST(ServerTest, StructuredOutputsOnEveryApi) {
  Fixture f;
  const json schema =
      json::parse(R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 6},
      "age": {"type": "integer", "minimum": 0, "maximum": 120}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
      "required": ["name", "age", "tags"], "additionalProperties": false})");
  auto check = [](const std::string& text) {
    const json j = json::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    ASSERT_TRUE(j["name"].is_string()) << text;
    EXPECT_LE(j["name"].get<std::string>().size(), 6u * 4);
    ASSERT_TRUE(j["age"].is_number_integer()) << text;
    EXPECT_GE(j["age"].get<int64_t>(), 0);
    EXPECT_LE(j["age"].get<int64_t>(), 120);
    EXPECT_LE(j["tags"].size(), 2u);
    EXPECT_EQ(j.size(), 3u);
  };
  for (int seed = 0; seed < 3; ++seed) {
    json body = chat("Who?", 300);
    body["temperature"] = 1.0;
    body["seed"] = seed;
    body["reasoning_budget"] = 4;
    body["response_format"] = {
        {"type", "json_schema"},
        {"json_schema", {{"name", "person"}, {"strict", true}, {"schema", schema}}}};
    body["logprobs"] = true;
    body["top_logprobs"] = 2;
    const Reply r = post(f.port, "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.j()["choices"][0];
    EXPECT_EQ(choice["logprobs"]["content"].size(),
              r.j()["usage"]["completion_tokens"].get<size_t>());  // one a token
    EXPECT_EQ(choice["finish_reason"], "stop");
    EXPECT_FALSE(choice["message"]["reasoning_content"].get<std::string>().empty());
    check(choice["message"]["content"].get<std::string>());
    body["stream"] = true;
    const Streamed s = collect(post(f.port, "/v1/chat/completions", body).body);
    EXPECT_EQ(s.content, choice["message"]["content"].get<std::string>());
    EXPECT_EQ(s.finish, "stop");
  }
  // reasoning_format none: the thinking stays in content, and the constraint still starts after it.
  json none = chat("Who?", 300);
  none["reasoning_budget"] = 4;
  none["reasoning_format"] = "none";
  none["response_format"] = {{"type", "json_schema"},
                             {"json_schema", {{"name", "person"}, {"schema", schema}}}};
  const Reply rn = post(f.port, "/v1/chat/completions", none);
  ASSERT_EQ(rn.status, 200) << rn.body;
  const std::string all = rn.j()["choices"][0]["message"]["content"].get<std::string>();
  const size_t end_think = all.find("</think>");
  ASSERT_NE(end_think, std::string::npos) << all;
  check(all.substr(end_think + 8));
  // llama.cpp's /completion with json_schema and with a GBNF grammar; a raw prompt is all answer.
  const Reply c =
      post(f.port, "/completion",
           {{"prompt", "Data:"}, {"n_predict", 200}, {"json_schema", schema}, {"temperature", 0}});
  ASSERT_EQ(c.status, 200) << c.body;
  check(c.j()["content"].get<std::string>());
  const Reply g = post(
      f.port, "/completion",
      {{"prompt", "Answer:"}, {"n_predict", 20}, {"grammar", "root ::= (\"yes\" | \"no\") \".\""}});
  ASSERT_EQ(g.status, 200) << g.body;
  const std::string yn = g.j()["content"].get<std::string>();
  EXPECT_TRUE(yn == "yes." || yn == "no.") << yn;
  const Reply bad = post(f.port, "/completion", {{"prompt", "x"}, {"grammar", "root ::= (\"a\""}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(bad.j()["error"]["param"], "grammar");
  EXPECT_NE(bad.j()["error"]["message"].get<std::string>().find("line 1, column"),
            std::string::npos);
  // Ollama's format: a schema, and "json".
  const json msgs = {{{"role", "user"}, {"content", "Who?"}}};
  const Reply o =
      post(f.port, "/api/chat",
           {{"messages", msgs},
            {"stream", false},
            {"format", schema},
            {"options", {{"temperature", 0}, {"num_predict", 300}, {"reasoning_budget", 4}}}});
  ASSERT_EQ(o.status, 200) << o.body;
  check(o.j()["message"]["content"].get<std::string>());
  const Reply oj = post(f.port, "/api/generate",
                        {{"prompt", "Who?"},
                         {"stream", false},
                         {"format", "json"},
                         {"think", false},
                         {"options", {{"temperature", 0}, {"num_predict", 60}}}});
  ASSERT_EQ(oj.status, 200) << oj.body;
  const Reply obad =
      post(f.port, "/api/chat",
           {{"messages", msgs}, {"format", {{"type", "string"}, {"uniqueItems", true}}}});
  EXPECT_EQ(obad.status, 400);
  EXPECT_NE(obad.j()["error"].get<std::string>().find("uniqueItems"), std::string::npos);
  EXPECT_EQ(
      post(f.port, "/api/chat", {{"messages", msgs}, {"tools", {{{"type", "function"}}}}}).status,
      400);
  EXPECT_EQ(post(f.port, "/api/chat", {{"messages", msgs}, {"images", {"aGk="}}}).status, 400);
  EXPECT_EQ(call(f.port, http::verb::get, "/health").status, 200);  // still serving
}

// Tool calls: a required call comes back in OpenAI's shape (message.tool_calls, finish_reason
// "tool_calls"), its arguments valid for the function's parameters; streamed, the deltas (id and
// name first, then the arguments in pieces) assemble into the same call.
TEST(ServerTest, ToolCallsWholeAndStreamed) {
  Fixture f;
  const json tools = json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 10}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
      "required": ["city", "days"], "additionalProperties": false}}}])");
  json body = chat("Weather in Paris?", 400);
  body["tools"] = tools;
  body["tool_choice"] = "required";
  body["reasoning_budget"] = 4;
  body["temperature"] = 1.0;
  body["seed"] = 3;
  const Reply r = post(f.port, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choice = r.j()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls") << r.body;
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u) << r.body;
  const json& call0 = choice["message"]["tool_calls"][0];
  EXPECT_EQ(call0["type"], "function");
  EXPECT_EQ(call0["function"]["name"], "get_weather");
  const json args = json::parse(call0["function"]["arguments"].get<std::string>());
  EXPECT_TRUE(args["city"].is_string());
  EXPECT_GE(args["days"].get<int>(), 1);
  EXPECT_LE(args["days"].get<int>(), 7);
  body["stream"] = true;
  const Reply sr = post(f.port, "/v1/chat/completions", body);
  std::string name, arguments, id, finish;
  for (const std::string& e : sse_events(sr.body)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const auto& ch : chunk["choices"]) {
      if (!ch["finish_reason"].is_null()) finish = ch["finish_reason"];
      if (!ch["delta"].contains("tool_calls")) continue;
      const json& tc = ch["delta"]["tool_calls"][0];
      EXPECT_EQ(tc["index"], 0);
      if (tc.contains("id")) id = tc["id"];
      if (tc["function"].contains("name")) name += tc["function"]["name"].get<std::string>();
      arguments += tc["function"]["arguments"].get<std::string>();
    }
  }
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_EQ(name, "get_weather");
  EXPECT_FALSE(id.empty());
  EXPECT_EQ(json::parse(arguments), args);
  // The result goes back as a tool message answering that call; the model then answers.
  json next = chat("Weather in Paris?", 30);
  next["tools"] = tools;
  next["messages"].push_back({{"role", "assistant"},
                              {"content", nullptr},
                              {"tool_calls", choice["message"]["tool_calls"]}});
  next["messages"].push_back(
      {{"role", "tool"}, {"tool_call_id", call0["id"]}, {"content", "18 C, sunny"}});
  EXPECT_EQ(post(f.port, "/v1/chat/completions", next).status, 200);
  // Ollama's tools: the model decides (auto; "required" is Ponder's extension); a call comes back
  // in message.tool_calls with its arguments as an object, whole and streamed alike.
  const json weather = json::parse(
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string", "maxLength": 10}}, "required": ["city"], "additionalProperties": false}}}])");
  int n_called = 0;
  for (int seed = 0; seed < 6; ++seed) {
    const json ob = {
        {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
        {"tools", weather},
        {"stream", false},
        {"tool_choice", seed % 2 ? "required" : "auto"},
        {"options",
         {{"temperature", 1.0}, {"seed", seed}, {"num_predict", 300}, {"reasoning_budget", 3}}}};
    const Reply o = post(f.port, "/api/chat", ob);
    ASSERT_EQ(o.status, 200) << o.body;
    const json msg = o.j()["message"];
    if (!msg.contains("tool_calls")) continue;
    ++n_called;
    EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_TRUE(msg["tool_calls"][0]["function"]["arguments"]["city"].is_string()) << msg;
    json streamed = ob;
    streamed["stream"] = true;
    const Reply so = post(f.port, "/api/chat", streamed);
    json last;
    std::string content;
    size_t pos = 0, nl;
    while ((nl = so.body.find('\n', pos)) != std::string::npos) {
      last = json::parse(so.body.substr(pos, nl - pos));
      content += last["message"]["content"].get<std::string>();
      pos = nl + 1;
    }
    EXPECT_EQ(last["message"]["tool_calls"], msg["tool_calls"]);
    EXPECT_EQ(content, msg["content"].get<std::string>());
  }
  EXPECT_GE(n_called, 3);  // every "required" one at least
  EXPECT_EQ(post(f.port, "/api/generate", {{"prompt", "x"}, {"tools", weather}}).status, 400);
  next["messages"].back()["tool_call_id"] = "call_unknown";
  const Reply unmatched = post(f.port, "/v1/chat/completions", next);
  EXPECT_EQ(unmatched.status, 400);
  EXPECT_EQ(unmatched.j()["error"]["param"], "messages[2].tool_call_id");
}

}  // namespace
}  // namespace ponder::server
