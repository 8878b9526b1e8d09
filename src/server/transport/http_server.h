// HttpServer: the asynchronous HTTP/1.1 transport (Boost.Beast on Asio). It accepts on one or
// more addresses, reads each request under limits (body 413, headers 431, URI 414), with a
// header timeout and an idle timeout for kept-alive connections, and hands every request to one
// handler with a Responder. Connections cost no thread: one I/O thread serves them all, and the
// handler must never block it (the Engine runs on its own thread).
// A Responder answers once (send) or streams (start_stream, write..., end), from any thread: each
// call is posted to the connection's strand. While a response is open the connection watches
// for the client going away and reports it once (on_disconnect), so a request can be cancelled
// within one engine step, prefill included.
// Depends on Boost.Asio/Beast and base only: nothing here knows about models or APIs.
#pragma once

#include <array>
#include <atomic>
#include <boost/beast/http.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/status.h"

namespace ponder::server {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpLimits {
  size_t max_body_bytes = 8u << 20;     // 413 above
  size_t max_header_bytes = 32u << 10;  // request line + headers; 431 above
  size_t max_uri_bytes = 8u << 10;      // 414 above
  double header_timeout_s = 10;         // a request must arrive whole within this
  double idle_timeout_s = 60;           // a kept-alive connection with no request is closed
  double write_timeout_s = 60;          // a client that reads nothing for this long is dropped
};

// Answers sent, by HTTP status (the refusals /metrics counts by reason). Any thread.
class HttpStatusCounts {
 public:
  void add(int status) {
    if (status >= 100 && status < kEnd) n_[status].fetch_add(1, std::memory_order_relaxed);
  }
  int64_t count(int status) const {
    return status >= 100 && status < kEnd ? n_[status].load(std::memory_order_relaxed) : 0;
  }

 private:
  static constexpr int kEnd = 600;
  std::array<std::atomic<int64_t>, kEnd> n_{};
};

class Session;

// One request's answer. Thread-safe; calls after the answer ended (or the client left) are
// ignored.
class Responder {
 public:
  Responder(std::shared_ptr<Session> session, uint64_t serial, bool keep_alive);
  // The whole answer at once.
  void send(int status, const std::string& content_type, std::string body,
            HttpHeaders headers = {});
  // A chunked answer: the header now, then write() each piece as it comes, then end().
  void start_stream(int status, const std::string& content_type, HttpHeaders headers = {});
  void write(std::string chunk);
  void end();
  // Called once, on the I/O thread, if the client goes away before the answer ended.
  void on_disconnect(std::function<void()> f);
  bool keep_alive() const { return keep_alive_; }
  // Whether send() or start_stream() was called.
  bool started() const { return started_.load(); }
  // Added to whatever this answer sends (CORS headers); call before answering.
  void add_header(std::string name, std::string value) {
    extra_.emplace_back(std::move(name), std::move(value));
  }

 private:
  std::shared_ptr<Session> session_;
  uint64_t serial_;
  bool keep_alive_;
  std::atomic<bool> started_{false};
  HttpHeaders extra_;
};

using HttpHandler =
    std::function<void(HttpRequest&& request, std::shared_ptr<Responder> responder)>;

class HttpServer {
 public:
  HttpServer(HttpLimits limits, HttpHandler handler);
  ~HttpServer();  // stops
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens on host:port (port 0: any free port); may be called for several hosts.
  Status listen(const std::string& host, uint16_t port);
  uint16_t port() const { return port_; }  // the last bound port
  // Runs the I/O thread; returns at once.
  void start();
  // Stops accepting; open connections are closed. Idempotent.
  void stop();
  // Runs `f` on the I/O thread (timers, shutdown steps).
  void post(std::function<void()> f);
  // Runs `f` on the I/O thread after `seconds`.
  void after(double seconds, std::function<void()> f);
  int64_t open_connections() const { return open_connections_.load(); }
  const HttpStatusCounts& status_counts() const { return status_counts_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::atomic<int64_t> open_connections_{0};
  HttpStatusCounts status_counts_;
};

}  // namespace ponder::server
