// The clients' idioms end to end on a real server: Ollama's load / unload requests and its error
// shape on every /api/ path, thinking turned off or budgeted in each API's words, unknown fields
// named in X-Ponder-Ignored-Fields, /v1/models/{id}, DeepSeek's usage fields, /api/show's facts,
// and /metrics as llama-server's dashboards read it (refusals counted by reason).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "runtime/ngram_draft.h"
#include "server/server_test_support.h"

namespace ponder::server {
namespace {

json user_chat(int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// The value of a Prometheus sample line ("name{labels} value"), or -1 when absent.
double sample(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

TEST(ApiIdiomsTest, OllamaLoadUnloadAndErrorShape) {
  Fixture f;
  Reply r = post(f.port, "/api/generate", {{"model", "tiny"}, {"prompt", ""}, {"keep_alive", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["done_reason"], "unload");
  EXPECT_EQ(r.j()["response"], "");
  r = post(f.port, "/api/chat", {{"model", "tiny"}, {"messages", json::array()}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["done_reason"], "load");
  EXPECT_EQ(r.j()["message"]["content"], "");
  EXPECT_EQ(f.server->engine().metrics().total.requests, 0);  // nothing was generated
  // Ollama's {"error": "..."} on unknown /api/ paths and wrong methods.
  r = call(f.port, http::verb::get, "/api/nonexistent");
  EXPECT_EQ(r.status, 404);
  EXPECT_TRUE(r.j()["error"].is_string()) << r.body;
  r = call(f.port, http::verb::get, "/api/chat");
  EXPECT_EQ(r.status, 405);
  EXPECT_TRUE(r.j()["error"].is_string()) << r.body;
  // ... while OpenAI's paths keep OpenAI's shape.
  r = call(f.port, http::verb::get, "/v1/nonexistent");
  EXPECT_TRUE(r.j()["error"].is_object()) << r.body;
}

TEST(ApiIdiomsTest, ThinkingOffAnswersAtOnceInEveryApi) {
  Fixture f;
  Reply r = post(f.port, "/api/chat",
                 {{"model", "tiny"},
                  {"stream", false},
                  {"think", false},
                  {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                  {"options", {{"num_predict", 6}, {"temperature", 0}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(r.j()["message"].contains("thinking")) << r.body;
  json body = user_chat(6);
  body["reasoning_effort"] = "minimal";
  r = post(f.port, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["usage"]["completion_tokens_details"]["reasoning_tokens"], 0) << r.body;
  EXPECT_FALSE(r.j()["choices"][0]["message"].contains("reasoning_content")) << r.body;
  // With thinking (the default) the same request spends its tokens thinking.
  r = post(f.port, "/v1/chat/completions", user_chat(6));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(r.j()["usage"]["completion_tokens_details"]["reasoning_tokens"], 0) << r.body;
  // An effort is a budget: low = 2 thinking tokens here, then the answer is forced.
  ServerConfig c;
  c.defaults.efforts = {2, 4, -1};
  Fixture budgeted(c);
  body = user_chat(12);
  body["reasoning_effort"] = "low";
  body["cache"] = false;
  r = post(budgeted.port, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const int reasoning = r.j()["usage"]["completion_tokens_details"]["reasoning_tokens"];
  EXPECT_LE(reasoning, 2 + 3) << r.body;  // the budget, then "</think>" and the blank line
}

// Ollama's options.reasoning_budget and think "low" cut the thinking where they say.
TEST(ApiIdiomsTest, OllamaThinkingBudgets) {
  ServerConfig c;
  c.defaults.efforts = {3, 6, -1};
  Fixture f(c);
  for (const json& control :
       {json{{"options", {{"reasoning_budget", 3}}}}, json{{"think", "low"}}}) {
    json body = {{"model", "tiny"},
                 {"stream", false},
                 {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                 {"options", {{"num_predict", 16}, {"temperature", 0}}}};
    for (const auto& [k, v] : control.items()) {
      if (k == "options") {
        body["options"].update(v);
      } else {
        body[k] = v;
      }
    }
    Reply r = post(f.port, "/api/chat", body);
    ASSERT_EQ(r.status, 200) << r.body;
    // The thinking is at most the budget's tokens (a token is at least one byte of text, and the
    // tiny model's pieces are short: the budget of 3 keeps it far below 16 tokens' worth).
    const json m = r.j()["message"];
    Reply whole = post(f.port, "/v1/chat/completions",
                       {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                        {"max_tokens", 16},
                        {"temperature", 0},
                        {"reasoning_budget", 3}});
    EXPECT_LE(whole.j()["usage"]["completion_tokens_details"]["reasoning_tokens"].get<int>(), 5);
    EXPECT_EQ(m.value("thinking", ""),
              whole.j()["choices"][0]["message"].value("reasoning_content", ""))
        << control << ": the same budget gives the same thinking on both routes";
  }
}

TEST(ApiIdiomsTest, UnknownFieldsAreNamedAndKnownOnesRefused) {
  Fixture f;
  json body = user_chat(2);
  body["frobnicate"] = true;
  Reply r = post(f.port, "/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers["X-Ponder-Ignored-Fields"], "frobnicate");
  body = user_chat(2);
  body["mirostat"] = 2;
  r = post(f.port, "/v1/chat/completions", body);
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.j()["error"]["param"], "mirostat");
  r = post(f.port, "/api/generate",
           {{"model", "tiny"},
            {"prompt", "hi"},
            {"stream", false},
            {"options", {{"num_predict", 2}, {"num_thread", 64}}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.j()["error"].get<std::string>().find("options.num_thread"), std::string::npos);
}

TEST(ApiIdiomsTest, ModelsUsageShowAndProps) {
  ServerConfig c;
  c.model.quantization = "Q8_0";
  c.model.parameter_size = "6M";
  c.model.chat_template = "{{ jinja }}";
  c.model.model_info = {{"qwen2.context_length", 4096}};
  Fixture f(c);
  Reply r = call(f.port, http::verb::get, "/v1/models/tiny");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["id"], "tiny");
  EXPECT_EQ(call(f.port, http::verb::get, "/v1/models/other").status, 404);
  // DeepSeek's usage names beside OpenAI's: a second identical prompt hits the prefix cache.
  json body = user_chat(2);
  body["cache"] = false;
  post(f.port, "/v1/chat/completions", body);
  r = post(f.port, "/v1/chat/completions", body);
  const json u = r.j()["usage"];
  EXPECT_EQ(u["prompt_cache_hit_tokens"], u["prompt_tokens_details"]["cached_tokens"]);
  EXPECT_GT(u["prompt_cache_hit_tokens"], 0);
  EXPECT_EQ(u["prompt_cache_hit_tokens"].get<int>() + u["prompt_cache_miss_tokens"].get<int>(),
            u["prompt_tokens"].get<int>());
  r = post(f.port, "/api/show", {{"model", "tiny"}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.j()["details"]["quantization_level"], "Q8_0");
  EXPECT_EQ(r.j()["details"]["parameter_size"], "6M");
  EXPECT_EQ(r.j()["template"], "{{ jinja }}");
  EXPECT_EQ(r.j()["model_info"]["qwen2.context_length"], 4096);
  EXPECT_EQ(post(f.port, "/api/show", {{"model", "llama3"}}).status, 404);
  r = call(f.port, http::verb::get, "/props");
  EXPECT_EQ(r.j()["chat_template"], "{{ jinja }}");
}

TEST(ApiIdiomsTest, MetricsCountRefusalsAndPerRequestSpeed) {
  Fixture f;
  for (int i = 0; i < 3; ++i) post(f.port, "/v1/chat/completions", {{"messages", 5}});
  call(f.port, http::verb::get, "/nope");
  std::string m = call(f.port, http::verb::get, "/metrics").body;
  EXPECT_EQ(sample(m, "ponder_requests_rejected_total{reason=\"bad_request\"}"), 3) << m;
  EXPECT_EQ(sample(m, "ponder_requests_rejected_total{reason=\"not_found\"}"), 1) << m;
  json body = user_chat(8);
  body["cache"] = false;
  ASSERT_EQ(post(f.port, "/v1/chat/completions", body).status, 200);
  // The engine counts a step's tokens after the step, which may end after the answer was sent.
  for (int i = 0; i < 2000 && f.server->engine().metrics().total.generated_tokens < 8; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  m = call(f.port, http::verb::get, "/metrics").body;
  // The finished request's own speed (its tokens over its generation time), as llama-server
  // means it: far above a rate over wall time that includes the idle seconds.
  EXPECT_GT(sample(m, "llamacpp:predicted_tokens_seconds"), 0) << m;
  EXPECT_EQ(sample(m, "llamacpp:tokens_predicted_total"), 8) << m;
  EXPECT_GT(sample(m, "llamacpp:tokens_predicted_seconds_total"), 0) << m;
  EXPECT_GE(sample(m, "llamacpp:n_decode_total"), 8) << m;
  // The window is since the last scrape: nothing finished since, so 0.
  m = call(f.port, http::verb::get, "/metrics").body;
  EXPECT_EQ(sample(m, "llamacpp:predicted_tokens_seconds"), 0) << m;
}

// Speculative decoding (--spec ngram) changes no answer and says what it did: llama-server's
// timings draft_n / draft_n_accepted, OpenAI's accepted / rejected prediction tokens, /metrics.
TEST(ApiIdiomsTest, SpeculativeDecodingIsReportedAndChangesNoAnswer) {
  Fixture plain(uncached());
  ServerConfig c = uncached();
  c.engine.draft = std::make_shared<NgramDraft>(1, 3);
  c.engine.min_draft = 2;  // a guess every step: the rows run whether or not text repeats
  Fixture spec(c);
  const json body = {{"prompt", "one two three one two three one two three one two"},
                     {"n_predict", 40},
                     {"temperature", 0.8},
                     {"seed", 5}};
  const Reply a = post(plain.port, "/completion", body), b = post(spec.port, "/completion", body);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(a.j()["content"], b.j()["content"]);
  EXPECT_FALSE(a.j()["timings"].contains("draft_n"));
  EXPECT_GT(b.j()["timings"]["draft_n"].get<int>(), 0) << b.body;
  EXPECT_LE(b.j()["timings"]["draft_n_accepted"].get<int>(),
            b.j()["timings"]["draft_n"].get<int>());
  const Reply chat = post(spec.port, "/v1/chat/completions", user_chat(20));
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json details = chat.j()["usage"]["completion_tokens_details"];
  EXPECT_GT(details["accepted_prediction_tokens"].get<int>() +
                details["rejected_prediction_tokens"].get<int>(),
            0)
      << chat.body;
  const std::string m = call(spec.port, http::verb::get, "/metrics").body;
  EXPECT_GT(sample(m, "ponder_draft_tokens_total"), 0) << m;
  EXPECT_GE(sample(m, "ponder_draft_accepted_tokens_total"), 0) << m;
}

}  // namespace
}  // namespace ponder::server
