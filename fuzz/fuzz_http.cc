// The whole server on arbitrary bytes: a real `ponder serve` (Server, its HTTP transport, every
// route of the three API families, the engine on a tiny real-format model, the response cache in
// memory) on a loopback port in this process; each input is written to a fresh connection as one
// client's bytes (one request, several pipelined, or garbage), the write side closed, and the
// answer read to its end. A 5xx other than 503, a server that stops answering (libFuzzer's
// -timeout), a crash or a sanitizer report is a finding. Every generation is capped at 4 tokens.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "fuzz/fuzz_common.h"
#include "gguf/gguf_file.h"
#include "model/qwen2_model.h"
#include "server/server.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace {

struct LiveServer {
  std::unique_ptr<ponder::GgufFile> file;
  std::unique_ptr<ponder::text::Tokenizer> tokenizer;
  std::unique_ptr<ponder::Qwen2Model> model;
  std::unique_ptr<ponder::text::ChatTemplate> tmpl;
  std::unique_ptr<ponder::server::Server> server;
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_http: %s\n", what.c_str());
  std::abort();
}

LiveServer& live() {
  static LiveServer* s = [] {
    auto* l = new LiveServer;  // lives until exit: the server's threads run for the whole session
    const std::string path = ponder::fuzz::tiny_model_path();
    auto file = ponder::GgufFile::open(path);
    if (!file.has_value()) fail("cannot open " + path + ": " + file.status().message());
    l->file = std::make_unique<ponder::GgufFile>(std::move(*file));
    auto tok = ponder::text::Tokenizer::from_gguf(*l->file);
    if (!tok.has_value()) fail(tok.status().message());
    l->tokenizer = std::make_unique<ponder::text::Tokenizer>(std::move(*tok));
    auto model = ponder::Qwen2Model::load(*l->file, true, 1, ponder::X16CacheOptions{});
    if (!model.has_value()) fail(model.status().message());
    l->model = std::move(*model);
    auto t = ponder::text::ChatTemplate::from_name("deepseek-r1");
    if (!t.has_value()) fail(t.status().message());
    l->tmpl = std::make_unique<ponder::text::ChatTemplate>(std::move(*t));
    ponder::server::ServerConfig c;
    c.port = 0;
    c.model_name = "tiny";
    c.defaults.max_tokens = 4;
    c.engine.kv_positions = 1024;
    c.engine.threads.n_threads = 1;
    c.keepalive_s = 0.05;
    c.limits.header_timeout_s = 2;
    c.limits.idle_timeout_s = 2;
    l->server = std::make_unique<ponder::server::Server>(c, *l->model, *l->tokenizer, *l->tmpl);
    if (auto st = l->server->start(); !st.is_ok()) fail(st.message());
    return l;
  }();
  return *s;
}

// Connected to the server; EINTR (libFuzzer's timer signal) finishes the connection by poll.
int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) fail(std::string("socket failed: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (errno != EINTR) fail(std::string("the server refused a connection: ") + std::strerror(errno));
  pollfd p{fd, POLLOUT, 0};
  while (::poll(&p, 1, 10000) < 0 && errno == EINTR) {
  }
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) fail(std::string("the server refused a connection: ") + std::strerror(err));
  return fd;
}

// The whole answer to `bytes` on a fresh connection (the server closes after the last request:
// the client's write side is closed).
std::string exchange(uint16_t port, const uint8_t* data, size_t size) {
  const int fd = connect_to(port);
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server closed early (a refused request): what it sent is read below
    sent += static_cast<size_t>(n);
  }
  ::shutdown(fd, SHUT_WR);
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  LiveServer& l = live();
  const std::string answer = exchange(l.server->port(), data, size);
  // Every status line: at the start, or after the end of an earlier answer.
  for (size_t at = 0; (at = answer.find("HTTP/1.1 ", at)) != std::string::npos; at += 9) {
    if (at != 0 && (at < 2 || answer.compare(at - 2, 2, "\r\n") != 0)) continue;
    const int status = std::atoi(answer.c_str() + at + 9);
    if (status >= 500 && status != 503)
      fail("a " + std::to_string(status) + " answer:\n" + answer.substr(at, 600));
  }
  return 0;
}
