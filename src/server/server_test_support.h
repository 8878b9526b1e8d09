// What the server's tests share: one HTTP call on a fresh connection (chunked bodies decoded),
// the data lines of an SSE body, and a real Server on a loopback port with a tiny model.
// Depends on server/server.h, runtime/tiny_model_for_test.h, Boost.Beast.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tiny_model_for_test.h"
#include "server/server.h"

namespace ponder::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using nlohmann::json;

struct Reply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  json j() const { return json::parse(body); }
};

// One request on a fresh connection, the whole answer read (chunked bodies decoded). Defined once
// in server_test_support.cc: Beast's synchronous read and write are costly to compile in every
// test file.
Reply call(uint16_t port, http::verb method, const std::string& target,
           const std::string& body = "",
           std::vector<std::pair<std::string, std::string>> headers = {});

inline Reply post(uint16_t port, const std::string& target, const json& body,
                  std::vector<std::pair<std::string, std::string>> h = {}) {
  return call(port, http::verb::post, target, body.dump(), std::move(h));
}

// The data lines of an SSE body, [DONE] included.
inline std::vector<std::string> sse_events(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(body.substr(pos + 6, end - pos - 6));
    pos = end;
  }
  return out;
}

struct Fixture {
  std::unique_ptr<TinyModel> m;
  std::unique_ptr<text::ChatTemplate> tmpl;
  std::unique_ptr<Server> server;
  uint16_t port = 0;

  explicit Fixture(ServerConfig c = {}, const std::string& type = "Q8_0") {
    m = load_tiny_model(type);
    auto t = text::ChatTemplate::from_name("deepseek-r1");
    EXPECT_TRUE(t.has_value());
    tmpl = std::make_unique<text::ChatTemplate>(*t);
    c.port = 0;
    c.model_name = "tiny";
    if (c.engine.kv_positions == 4096) c.engine.kv_positions = 2048;
    c.engine.threads.n_threads = 2;
    server = std::make_unique<Server>(c, *m->model, m->tokenizer, *tmpl);
    EXPECT_TRUE(server->start().is_ok());
    port = server->port();
  }
};

// A typed SSE event (Anthropic's and the Responses API's "event: NAME\ndata: JSON\n\n").
struct SseEvent {
  std::string name;  // the event: line
  json data;
};

// The typed events of an SSE body; each event: line must name its data's type.
inline std::vector<SseEvent> typed_sse_events(const std::string& body) {
  std::vector<SseEvent> out;
  size_t pos = 0;
  while ((pos = body.find("event: ", pos)) != std::string::npos) {
    const size_t nl = body.find('\n', pos);
    const size_t end = body.find("\n\n", nl);
    SseEvent e{body.substr(pos + 7, nl - pos - 7), json::parse(body.substr(nl + 7, end - nl - 7))};
    EXPECT_EQ(body.compare(nl + 1, 6, "data: "), 0);
    EXPECT_EQ(e.data["type"], e.name);
    out.push_back(std::move(e));
    pos = end;
  }
  return out;
}

// A server without the response cache (every request runs the engine).
inline ServerConfig uncached() {
  ServerConfig c;
  c.response_cache = false;
  return c;
}

}  // namespace ponder::server
