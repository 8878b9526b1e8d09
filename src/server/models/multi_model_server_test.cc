// Several models in one server (issue 34): a real Server on a loopback port offering two tiny
// models of ../shared/models, loaded by a test loader that counts its loads. Routing by name,
// alias and file stem; unknown names in each API's shape; the lists; load on first use; the LRU
// unload under a memory budget; Ollama's keep_alive; a request waiting for a load; a model in
// use never unloaded.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <thread>

#include "gguf/model_fingerprint.h"
#include "server/server_test_support.h"

namespace ponder::server {
namespace {

std::string tiny_path(const std::string& type) {
  return std::string(PONDER_SHARED_DIR) + "/models/tiny-" + type + ".gguf";
}

ModelSpec tiny_spec(const std::string& type, const std::string& alias) {
  ModelSpec spec;
  spec.path = tiny_path(type);
  spec.name = alias;
  spec.aliases = {"tiny-" + type, "tiny-" + type + ".gguf"};
  auto file = GgufFile::open(spec.path);
  EXPECT_TRUE(file.has_value());
  spec.facts = read_model_facts(*file);
  spec.fingerprint = model_fingerprint(*file);
  spec.bytes = 10 << 20;  // the tests' own figure: the budget below holds one model or two
  return spec;
}

struct Loads {
  std::atomic<int> count{0};
  std::atomic<double> delay_s{0};
};

ModelLoader tiny_loader(std::shared_ptr<Loads> loads) {
  return [loads](const ModelSpec& spec, const LoadProgress& progress) -> Expected<LoadedModel> {
    struct Owner {
      GgufFile file;
      text::Tokenizer tokenizer;
      std::unique_ptr<Qwen2Model> model;
    };
    progress(0.1, "opening");
    if (loads->delay_s > 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(loads->delay_s.load()));
      progress(0.5, "waiting");
    }
    PONDER_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(spec.path));
    PONDER_ASSIGN_OR_RETURN(text::Tokenizer tok, text::Tokenizer::from_gguf(file));
    auto owner = std::make_shared<Owner>(Owner{std::move(file), std::move(tok), nullptr});
    PONDER_ASSIGN_OR_RETURN(owner->model, Qwen2Model::load(owner->file));
    PONDER_ASSIGN_OR_RETURN(text::ChatTemplate tmpl, text::ChatTemplate::from_name("deepseek-r1"));
    LoadedModel l;
    l.owner = owner;
    l.model = owner->model.get();
    l.tokenizer = &owner->tokenizer;
    l.chat_template = std::make_shared<const text::ChatTemplate>(std::move(tmpl));
    l.engine.kv_positions = 512;
    l.engine.threads.n_threads = 1;
    ++loads->count;
    return l;
  };
}

struct Two {
  std::shared_ptr<Loads> loads = std::make_shared<Loads>();
  std::unique_ptr<Server> server;
  uint16_t port = 0;
  explicit Two(int64_t max_memory = 0, double keep_alive_s = -1) {
    ServerConfig c = uncached();
    c.port = 0;
    c.max_memory = max_memory;
    c.keep_alive_s = keep_alive_s;
    server = std::make_unique<Server>(
        c,
        std::vector<ModelSpec>{tiny_spec("Q8_0", "r1-small"), tiny_spec("F32", "deepseek-r1:7b")},
        tiny_loader(loads));
    EXPECT_TRUE(server->start().is_ok());
    port = server->port();
  }
  std::vector<std::string> loaded() const {
    std::vector<std::string> names;
    const json ps = call(port, http::verb::get, "/api/ps").j();
    for (const json& m : ps["models"]) names.push_back(m["name"]);
    return names;
  }
  // Waits until /api/ps shows exactly these models (loads and unloads are on another thread).
  bool wait_loaded(const std::vector<std::string>& want) const {
    for (int i = 0; i < 200; ++i) {
      if (loaded() == want) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

json completion(const std::string& model) {
  return {{"model", model},
          {"prompt", "The sky is"},
          {"max_tokens", 4},
          {"temperature", 0},
          {"logprobs", 1}};
}

TEST(MultiModelServerTest, NamesMatchAliasStemFileAndLatest) {
  auto spec = [](const std::string& name, const std::string& stem) {
    ModelSpec s;
    s.name = name;
    s.aliases = {stem, stem + ".gguf"};
    return s;
  };
  ModelRegistry two({spec("deepseek-r1:1.5b", "r1-1.5b-q4_k_m"), spec("big", "R1-7B")},
                    tiny_loader(std::make_shared<Loads>()), {});
  EXPECT_EQ(two.find("deepseek-r1:1.5b"), 0);
  EXPECT_EQ(two.find("r1-1.5b-q4_k_m"), 0);
  EXPECT_EQ(two.find("r1-1.5b-q4_k_m.gguf"), 0);
  EXPECT_EQ(two.find("big:latest"), 1);
  EXPECT_EQ(two.find("r1-7b"), 1);  // case is ignored
  EXPECT_EQ(two.find(""), 0);       // no name: the first model
  EXPECT_EQ(two.find("deepseek-r1"), -1);
  EXPECT_EQ(two.find("deepseek-r1:7b"), -1);
  EXPECT_EQ(two.find("big:q8"), -1);
  ModelRegistry one({spec("tiny", "tiny-Q8_0")}, tiny_loader(std::make_shared<Loads>()), {});
  EXPECT_EQ(one.find("gpt-4o"), 0);  // one model answers to any name, as before
}

TEST(MultiModelServerTest, RoutesByNameAliasAndFileStem) {
  Two t;
  const Reply a = post(t.port, "/v1/completions", completion("r1-small"));
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.j()["model"], "r1-small");
  const Reply stem = post(t.port, "/v1/completions", completion("tiny-Q8_0"));
  const Reply latest = post(t.port, "/v1/completions", completion("r1-small:latest"));
  const Reply b = post(t.port, "/v1/completions", completion("deepseek-r1:7b"));
  const Reply b_file = post(t.port, "/v1/completions", completion("tiny-F32.gguf"));
  for (const Reply* r : {&stem, &latest, &b, &b_file}) ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(stem.j()["model"], "r1-small");
  EXPECT_EQ(b.j()["model"], "deepseek-r1:7b");
  EXPECT_EQ(b_file.j()["model"], "deepseek-r1:7b");
  const json lp_a = a.j()["choices"][0]["logprobs"]["token_logprobs"];
  const json lp_b = b.j()["choices"][0]["logprobs"]["token_logprobs"];
  // The same model under any of its names gives the same bits; the other model other ones.
  EXPECT_EQ(stem.j()["choices"][0]["logprobs"]["token_logprobs"], lp_a);
  EXPECT_EQ(latest.j()["choices"][0]["logprobs"]["token_logprobs"], lp_a);
  EXPECT_EQ(b_file.j()["choices"][0]["logprobs"]["token_logprobs"], lp_b);
  EXPECT_NE(lp_a, lp_b);
  EXPECT_EQ(t.loads->count, 2);  // each loaded once
  // Ollama's chat names the model as Ollama does.
  const Reply o = post(t.port, "/api/chat",
                       {{"model", "deepseek-r1:7b"},
                        {"stream", false},
                        {"messages", {{{"role", "user"}, {"content", "hi"}}}},
                        {"options", {{"num_predict", 3}}}});
  ASSERT_EQ(o.status, 200) << o.body;
  EXPECT_EQ(o.j()["model"], "deepseek-r1:7b");
  EXPECT_EQ(o.j()["load_duration"], 0);  // loaded already
}

TEST(MultiModelServerTest, TheResponseCacheKeepsModelsApart) {
  ServerConfig c;  // the response cache on, in memory
  c.port = 0;
  Server server(c, std::vector<ModelSpec>{tiny_spec("Q8_0", "a"), tiny_spec("Q4_K_M", "b")},
                tiny_loader(std::make_shared<Loads>()));
  ASSERT_TRUE(server.start().is_ok());
  const Reply a = post(server.port(), "/v1/completions", completion("a"));
  const Reply b = post(server.port(), "/v1/completions", completion("b"));
  const Reply a2 = post(server.port(), "/v1/completions", completion("a"));
  EXPECT_EQ(a.headers.at("X-Ponder-Cache"), "miss");
  EXPECT_EQ(b.headers.at("X-Ponder-Cache"), "miss");  // the same request, another model
  EXPECT_EQ(a2.headers.at("X-Ponder-Cache"), "hit");
  EXPECT_EQ(b.j()["model"], "b");
  EXPECT_EQ(a2.j()["choices"][0]["text"], a.j()["choices"][0]["text"]);
}

TEST(MultiModelServerTest, AModelThatFailsToLoadIsA500AndTheOthersServe) {
  ModelSpec broken = tiny_spec("Q8_0", "broken");
  broken.path = "/nonexistent/broken.gguf";
  broken.aliases.clear();
  ServerConfig c = uncached();
  c.port = 0;
  Server server(c, std::vector<ModelSpec>{broken, tiny_spec("Q4_K_M", "good")},
                tiny_loader(std::make_shared<Loads>()));
  ASSERT_TRUE(server.start().is_ok());
  for (int attempt = 0; attempt < 2; ++attempt) {  // the next request tries again
    const Reply r = post(server.port(), "/v1/completions", completion("broken"));
    EXPECT_EQ(r.status, 500);
    EXPECT_NE(r.j()["error"]["message"].get<std::string>().find("could not be loaded"),
              std::string::npos)
        << r.body;
  }
  EXPECT_EQ(post(server.port(), "/v1/completions", completion("good")).status, 200);
}

TEST(MultiModelServerTest, UnknownModelIsA404InEachApisShape) {
  Two t;
  const json messages = {{{"role", "user"}, {"content", "hi"}}};
  const std::pair<const char*, json> openai[] = {
      {"/v1/chat/completions", {{"model", "nope"}, {"messages", messages}}},
      {"/v1/completions", {{"model", "nope"}, {"prompt", "x"}}},
      {"/v1/responses", {{"model", "nope"}, {"input", "x"}}}};
  for (const auto& [path, body] : openai) {
    const Reply r = post(t.port, path, body);
    EXPECT_EQ(r.status, 404) << path << r.body;
    EXPECT_EQ(r.j()["error"]["code"], "model_not_found") << path << r.body;
    EXPECT_EQ(r.j()["error"]["param"], "model") << path;
  }
  for (const char* path : {"/api/chat", "/api/generate", "/api/show"}) {
    const Reply r =
        post(t.port, path, {{"model", "nope"}, {"messages", messages}, {"prompt", "x"}});
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.j(), json({{"error", "model 'nope' not found"}})) << path;
  }
  const Reply m =
      post(t.port, "/v1/messages", {{"model", "nope"}, {"max_tokens", 8}, {"messages", messages}});
  EXPECT_EQ(m.status, 404);
  EXPECT_EQ(m.j()["type"], "error");
  EXPECT_EQ(m.j()["error"]["type"], "not_found_error") << m.body;
  EXPECT_EQ(post(t.port, "/completion", {{"model", "nope"}, {"prompt", "x"}}).status, 404);
  EXPECT_EQ(call(t.port, http::verb::get, "/v1/models/nope").status, 404);
  // Ollama's keep_alive is checked before anything loads.
  EXPECT_EQ(post(t.port, "/api/generate", {{"model", "r1-small"}, {"keep_alive", "soon"}}).status,
            400);
  EXPECT_TRUE(t.loaded().empty());
  EXPECT_EQ(t.loads->count, 0);
}

TEST(MultiModelServerTest, ListsEveryModelAndLoadsOnFirstUse) {
  Two t;
  const json models = call(t.port, http::verb::get, "/v1/models").j()["data"];
  ASSERT_EQ(models.size(), 2u);
  EXPECT_EQ(models[0]["id"], "r1-small");
  EXPECT_EQ(models[1]["id"], "deepseek-r1:7b");
  EXPECT_EQ(call(t.port, http::verb::get, "/v1/models/deepseek-r1:7b").j()["id"], "deepseek-r1:7b");
  const json tags = call(t.port, http::verb::get, "/api/tags").j()["models"];
  ASSERT_EQ(tags.size(), 2u);
  EXPECT_EQ(tags[0]["name"], "r1-small:latest");
  EXPECT_EQ(tags[1]["name"], "deepseek-r1:7b");
  EXPECT_EQ(tags[1]["details"]["quantization_level"], "F32");
  EXPECT_TRUE(t.loaded().empty());  // nothing loads before it is asked for
  EXPECT_EQ(call(t.port, http::verb::get, "/slots").j().size(), 0u);
  ASSERT_EQ(post(t.port, "/v1/completions", completion("deepseek-r1:7b")).status, 200);
  EXPECT_EQ(t.loaded(), std::vector<std::string>{"deepseek-r1:7b"});
  const json slots = call(t.port, http::verb::get, "/slots").j();
  ASSERT_GE(slots.size(), 1u);
  EXPECT_EQ(slots[0]["model"], "deepseek-r1:7b");
  // Ollama's load idiom loads the other one and answers once it is loaded.
  const Reply load = post(t.port, "/api/generate", {{"model", "r1-small"}});
  ASSERT_EQ(load.status, 200) << load.body;
  EXPECT_EQ(load.j()["done_reason"], "load");
  EXPECT_EQ(t.loaded().size(), 2u);
  EXPECT_EQ(t.loads->count, 2);
}

TEST(MultiModelServerTest, LeastRecentlyUsedUnloadsUnderTheMemoryBudget) {
  Two t(15 << 20);  // one 10 MB model fits, two do not
  ASSERT_EQ(post(t.port, "/v1/completions", completion("r1-small")).status, 200);
  EXPECT_EQ(t.loaded(), std::vector<std::string>{"r1-small:latest"});
  ASSERT_EQ(post(t.port, "/v1/completions", completion("deepseek-r1:7b")).status, 200);
  EXPECT_EQ(t.loaded(), std::vector<std::string>{"deepseek-r1:7b"});
  const Reply again = post(t.port, "/v1/completions", completion("r1-small"));
  ASSERT_EQ(again.status, 200);
  EXPECT_EQ(t.loaded(), std::vector<std::string>{"r1-small:latest"});
  EXPECT_EQ(t.loads->count, 3);
}

TEST(MultiModelServerTest, OllamaKeepAliveZeroUnloads) {
  Two t;
  // A generation with keep_alive 0 runs, then its model goes.
  const Reply r = post(t.port, "/api/generate",
                       {{"model", "r1-small"},
                        {"prompt", "hi"},
                        {"stream", false},
                        {"keep_alive", 0},
                        {"options", {{"num_predict", 3}}}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_GT(r.j()["load_duration"].get<int64_t>(), 0);  // this request waited for the load
  EXPECT_TRUE(t.wait_loaded({}));
  // The load idiom, then the unload idiom.
  ASSERT_EQ(post(t.port, "/api/chat", {{"model", "deepseek-r1:7b"}, {"keep_alive", "5m"}}).status,
            200);
  const json ps = call(t.port, http::verb::get, "/api/ps").j()["models"];
  ASSERT_EQ(ps.size(), 1u);
  EXPECT_NE(ps[0]["expires_at"], "9999-12-31T23:59:59Z");  // a deadline five minutes away
  const Reply u = post(t.port, "/api/chat", {{"model", "deepseek-r1:7b"}, {"keep_alive", 0}});
  EXPECT_EQ(u.j()["done_reason"], "unload");
  EXPECT_TRUE(t.wait_loaded({}));
}

TEST(MultiModelServerTest, KeepAliveExpiresAfterTheIdleTime) {
  Two t(0, 0.2);  // --keep-alive 0.2 s
  ASSERT_EQ(post(t.port, "/v1/completions", completion("r1-small")).status, 200);
  EXPECT_TRUE(t.wait_loaded({}));
}

TEST(MultiModelServerTest, RequestsForALoadingModelWaitAndSucceed) {
  Two t;
  t.loads->delay_s = 0.3;
  auto first = std::async(std::launch::async,
                          [&] { return post(t.port, "/v1/completions", completion("r1-small")); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the load has begun
  json streamed = completion("r1-small");
  streamed["stream"] = true;
  const Reply second = post(t.port, "/v1/completions", streamed);
  const Reply a = first.get();
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(second.status, 200) << second.body;
  EXPECT_EQ(t.loads->count, 1);  // one load served both
  // The stream opened while the model loaded and showed the load's progress, then the answer.
  const std::vector<std::string> events = sse_events(second.body);
  ASSERT_GE(events.size(), 2u);
  const json first_event = json::parse(events[0]);
  EXPECT_EQ(first_event["load_progress"]["model"], "r1-small") << events[0];
  EXPECT_GT(first_event["load_progress"]["progress"].get<double>(), 0);
  EXPECT_TRUE(first_event["choices"].empty());
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_EQ(json::parse(events[events.size() - 2])["model"], "r1-small");
}

// Every family's stream opens while its model loads, in its own protocol's terms, then answers:
// llama.cpp's /completion with load_progress chunks, Anthropic's with ping events (and the
// request-id header at once), the Responses API with comment lines. A model that fails to load
// then ends the stream with the protocol's error event.
TEST(MultiModelServerTest, EveryFamilysStreamShowsTheLoadThenAnswers) {
  struct Case {
    const char* path;
    json body;
    const char* first;   // how the body begins: written before the model was there
    const char* answer;  // in the body once answered
    const char* error;   // in the body when the model fails to load
  };
  const json messages = json::array({{{"role", "user"}, {"content", "The sky is"}}});
  const std::vector<Case> cases = {
      {"/completion",
       {{"prompt", "The sky is"}, {"n_predict", 4}, {"stream", true}},
       ": loading model\n",
       "\"stop\":true",
       "could not be loaded"},
      {"/v1/messages",
       {{"max_tokens", 4}, {"messages", messages}, {"stream", true}},
       "event: ping\n",
       "event: message_stop",
       "event: error"},
      {"/v1/responses",
       {{"input", "The sky is"}, {"max_output_tokens", 16}, {"stream", true}},
       ": loading model\n",
       "event: response.output_item.added",
       "event: error"},
  };
  for (const Case& c : cases) {
    Two t;
    t.loads->delay_s = 0.2;
    json body = c.body;
    body["model"] = "r1-small";
    const Reply r = post(t.port, c.path, body);
    EXPECT_EQ(r.status, 200) << c.path << r.body;
    EXPECT_EQ(r.body.substr(0, std::strlen(c.first)), c.first) << c.path;
    EXPECT_NE(r.body.find(c.answer), std::string::npos) << c.path << ": " << r.body;
    EXPECT_EQ(t.loads->count, 1) << c.path;
    if (std::string(c.path) == "/completion") {  // and the load's progress, before the answer
      const size_t at = r.body.find("\"load_progress\":{\"model\":\"r1-small\"");
      EXPECT_LT(at, r.body.find(c.answer)) << r.body;
    }
  }
  // The load fails (a file that is no model): the stream, open already, ends with an error.
  for (const Case& c : cases) {
    const std::string bad = ::testing::TempDir() + "not-a-model.gguf";
    { std::ofstream(bad) << "not a gguf file"; }
    ServerConfig config = uncached();
    config.port = 0;
    ModelSpec spec = tiny_spec("Q8_0", "broken");
    spec.path = bad;
    auto loads = std::make_shared<Loads>();
    loads->delay_s = 0.1;
    Server server(config, {spec}, tiny_loader(loads));
    ASSERT_TRUE(server.start().is_ok());
    json body = c.body;
    body["model"] = "broken";
    const Reply r = post(server.port(), c.path, body);
    EXPECT_EQ(r.status, 200) << c.path;  // the status line went out before the load failed
    EXPECT_EQ(r.body.substr(0, std::strlen(c.first)), c.first) << c.path;
    EXPECT_NE(r.body.find(c.error), std::string::npos) << c.path << ": " << r.body;
  }
}

TEST(MultiModelServerTest, AClientThatLeavesWhileItsModelLoadsSubmitsNothing) {
  Two t;
  t.loads->delay_s = 0.3;
  for (const bool stream : {false, true}) {
    json body = completion("r1-small");
    body["stream"] = stream;
    {
      net::io_context ioc;
      tcp::socket s(ioc);
      s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), t.port));
      http::request<http::string_body> req{http::verb::post, "/v1/completions", 11};
      req.set(http::field::host, "127.0.0.1");
      req.body() = body.dump();
      req.prepare_payload();
      http::write(s, req);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }  // gone, while the model loads
    ASSERT_TRUE(t.wait_loaded({"r1-small:latest"}));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(t.server->models().peek(0)->engine.metrics().total.requests, 0) << stream;
    t.server->models().set_keep_alive(0, 0);  // unloaded again for the streamed round
    ASSERT_TRUE(t.wait_loaded({}));
    t.server->models().set_keep_alive(0, -1);
  }
}

TEST(MultiModelServerTest, AModelInUseIsNeverUnloaded) {
  Two t(15 << 20);
  ASSERT_EQ(post(t.port, "/v1/completions", completion("r1-small")).status, 200);
  // Hold the model as a running request does.
  ModelRef held;
  t.server->models().acquire(0, [&](ModelRef m, const std::string&) { held = std::move(m); });
  ASSERT_TRUE(held != nullptr);
  t.server->models().set_keep_alive(0, 0);  // keep_alive 0 while it runs: after it ends
  // The other model waits for room: the one in use is not unloaded under it.
  auto other = std::async(std::launch::async, [&] {
    return post(t.port, "/v1/completions", completion("deepseek-r1:7b"));
  });
  EXPECT_EQ(other.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout);
  EXPECT_EQ(t.loaded(), std::vector<std::string>{"r1-small:latest"});
  held.reset();  // the request ends: now it may go
  const Reply r = other.get();
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(t.wait_loaded({"deepseek-r1:7b"}));
}

}  // namespace
}  // namespace ponder::server
