#include "server/transport/http_server.h"

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <deque>
#include <optional>
#include <sstream>

#include "base/log.h"

namespace ponder::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::chrono::milliseconds ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

template <typename Message>
void set_headers(Message& res, const std::string& content_type, const HttpHeaders& headers,
                 bool keep_alive) {
  res.set(http::field::server, "ponder");
  if (!content_type.empty()) res.set(http::field::content_type, content_type);
  for (const auto& [name, value] : headers) res.set(name, value);
  res.keep_alive(keep_alive);
}

std::string serialize_response(int status, const std::string& content_type, std::string body,
                               const HttpHeaders& headers, bool keep_alive) {
  http::response<http::string_body> res{static_cast<http::status>(status), 11};
  set_headers(res, content_type, headers, keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  std::ostringstream os;
  os << res;
  return os.str();
}

}  // namespace

// One connection. Everything below runs on its strand.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpLimits& limits, HttpHandler& handler,
          std::atomic<int64_t>& open, HttpStatusCounts& statuses)
      : stream_(std::move(socket)),
        limits_(limits),
        handler_(handler),
        open_(open),
        statuses_(statuses) {
    open_++;
  }
  ~Session() { open_--; }

  void count_status(int status) { statuses_.add(status); }

  void run() {
    net::dispatch(stream_.get_executor(),
                  [self = shared_from_this()] { self->watch(self->limits_.header_timeout_s); });
  }
  // From any thread: bytes of the answer to request `serial`; `last` completes the answer.
  void enqueue(uint64_t serial, std::string bytes, bool last) {
    net::post(stream_.get_executor(), [self = shared_from_this(), serial, b = std::move(bytes),
                                       last]() mutable {
      if (serial != self->serial_ || !self->answering_ || self->answer_complete_ || self->closed_)
        return;
      self->out_.push_back(std::move(b));
      self->answer_complete_ = last;
      if (!self->writing_) self->write_next();
    });
  }
  void set_on_disconnect(uint64_t serial, std::function<void()> f) {
    net::post(stream_.get_executor(),
              [self = shared_from_this(), serial, f = std::move(f)]() mutable {
                if (serial == self->serial_ && self->answering_)
                  self->on_disconnect_ = std::move(f);
              });
  }

 private:
  // Waits for bytes: the next request of a kept-alive connection, or (while answering) the
  // client going away.
  void watch(double timeout_s) {
    if (watching_ || closed_) return;
    watching_ = true;
    if (timeout_s > 0) stream_.expires_after(ms(timeout_s));
    stream_.async_read_some(
        buffer_.prepare(4096),
        [self = shared_from_this()](beast::error_code ec, size_t n) { self->on_watch(ec, n); });
  }
  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (ec) {
      if (answering_) {
        disconnected();
      } else {
        close();
      }
      return;
    }
    buffer_.commit(n);
    if (!answering_) read_request();  // else: a pipelined request, read after this answer
  }

  void read_request() {
    parser_.emplace();
    parser_->body_limit(limits_.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    stream_.expires_after(ms(limits_.header_timeout_s));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_request(ec); });
  }

  void on_request(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == beast::error::timeout || ec == net::error::eof)
      return close();
    if (ec == http::error::body_limit)
      return reply_and_close(413, "the request body is larger than the limit");
    if (ec == http::error::header_limit)
      return reply_and_close(431, "the request headers are larger than the limit");
    if (ec) return reply_and_close(400, "malformed HTTP request: " + ec.message());
    if (parser_->get().target().size() > limits_.max_uri_bytes)
      return reply_and_close(414, "the URI is longer than the limit");
    HttpRequest req = parser_->release();
    keep_alive_ = req.keep_alive();
    serial_++;
    answering_ = true;
    answer_complete_ = false;
    on_disconnect_ = nullptr;
    stream_.expires_never();
    handler_(std::move(req), std::make_shared<Responder>(shared_from_this(), serial_, keep_alive_));
    if (buffer_.size() == 0) watch(0);
  }

  void reply_and_close(int status, const std::string& message) {
    statuses_.add(status);
    serial_++;
    answering_ = true;
    answer_complete_ = true;
    keep_alive_ = false;
    const std::string body =
        "{\"error\":{\"message\":\"" + message +
        "\",\"type\":\"invalid_request_error\",\"code\":" + std::to_string(status) + "}}";
    out_.push_back(serialize_response(status, "application/json", body, {}, false));
    if (!writing_) write_next();
  }

  void write_next() {
    if (closed_) return;
    if (out_.empty()) {
      writing_ = false;
      if (answer_complete_) {
        finish_answer();
      } else {
        stream_.expires_never();  // waiting on the engine, not on the client
      }
      return;
    }
    writing_ = true;
    stream_.expires_after(ms(limits_.write_timeout_s));
    net::async_write(stream_, net::buffer(out_.front()),
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (self->closed_)
                         return;  // closed meanwhile (the client left): nothing more to write
                       if (ec) return self->disconnected();
                       self->out_.pop_front();
                       self->write_next();
                     });
  }

  void finish_answer() {
    answering_ = false;
    on_disconnect_ = nullptr;
    if (!keep_alive_) {
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      return close();
    }
    if (buffer_.size() > 0) return read_request();
    if (watching_) {
      stream_.expires_after(ms(limits_.idle_timeout_s));
    } else {
      watch(limits_.idle_timeout_s);
    }
  }

  void disconnected() {
    if (answering_ && on_disconnect_) {
      auto f = std::move(on_disconnect_);
      on_disconnect_ = nullptr;
      f();
    }
    answering_ = false;
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;  // out_ stays: a write in flight still points into its front
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  const HttpLimits& limits_;
  HttpHandler& handler_;
  std::atomic<int64_t>& open_;
  HttpStatusCounts& statuses_;
  uint64_t serial_ = 0;           // the request being answered
  bool answering_ = false;        // handed to the handler, answer not fully written
  bool answer_complete_ = false;  // its last bytes are queued
  bool keep_alive_ = false;
  bool writing_ = false;
  bool watching_ = false;
  bool closed_ = false;
  std::deque<std::string> out_;
  std::function<void()> on_disconnect_;
};

Responder::Responder(std::shared_ptr<Session> session, uint64_t serial, bool keep_alive)
    : session_(std::move(session)), serial_(serial), keep_alive_(keep_alive) {}

void Responder::send(int status, const std::string& content_type, std::string body,
                     HttpHeaders headers) {
  started_ = true;
  session_->count_status(status);
  headers.insert(headers.end(), extra_.begin(), extra_.end());
  session_->enqueue(serial_,
                    serialize_response(status, content_type, std::move(body), headers, keep_alive_),
                    true);
}

void Responder::start_stream(int status, const std::string& content_type, HttpHeaders headers) {
  started_ = true;
  session_->count_status(status);
  headers.insert(headers.end(), extra_.begin(), extra_.end());
  http::response<http::empty_body> res{static_cast<http::status>(status), 11};
  set_headers(res, content_type, headers, keep_alive_);
  res.set(http::field::cache_control, "no-cache");
  res.chunked(true);
  std::ostringstream os;
  os << res.base();
  session_->enqueue(serial_, os.str(), false);
}

void Responder::write(std::string chunk) {
  if (chunk.empty()) return;  // an empty chunk would end the stream
  char size[32];
  std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
  session_->enqueue(serial_, size + std::move(chunk) + "\r\n", false);
}

void Responder::end() { session_->enqueue(serial_, "0\r\n\r\n", true); }

void Responder::on_disconnect(std::function<void()> f) {
  session_->set_on_disconnect(serial_, std::move(f));
}

struct HttpServer::Impl {
  HttpLimits limits;
  HttpHandler handler;
  net::io_context ioc{1};
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::atomic<int64_t>* open = nullptr;
  HttpStatusCounts* statuses = nullptr;
  bool stopped = false;

  void accept(tcp::acceptor& a) {
    a.async_accept(net::make_strand(ioc), [this, &a](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !a.is_open()) return;
        log_warn("http: accept failed: {}", ec.message());  // e.g. out of file descriptors
      } else {
        socket.set_option(tcp::no_delay(true), ec);
        std::make_shared<Session>(std::move(socket), limits, handler, *open, *statuses)->run();
      }
      accept(a);
    });
  }
};

HttpServer::HttpServer(HttpLimits limits, HttpHandler handler) : impl_(std::make_unique<Impl>()) {
  impl_->limits = limits;
  impl_->handler = std::move(handler);
  impl_->open = &open_connections_;
  impl_->statuses = &status_counts_;
}

HttpServer::~HttpServer() { stop(); }

Status HttpServer::listen(const std::string& host, uint16_t port) {
  beast::error_code ec;
  tcp::resolver resolver(impl_->ioc);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty())
    return Status::errorf("cannot resolve the address '{}': {}", host, ec.message());
  const tcp::endpoint ep = results.begin()->endpoint();
  auto a = std::make_unique<tcp::acceptor>(impl_->ioc);
  a->open(ep.protocol(), ec);
  if (!ec) a->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec && ep.protocol() == tcp::v6()) a->set_option(net::ip::v6_only(true), ec);
  if (!ec) a->bind(ep, ec);
  if (!ec) a->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::errorf("cannot listen on {}:{}: {}", host, port, ec.message());
  port_ = a->local_endpoint().port();
  impl_->accept(*a);
  impl_->acceptors.push_back(std::move(a));
  return Status::ok();
}

void HttpServer::start() {
  // An exception escaping a handler (a bug: handlers answer errors, they do not throw) is logged
  // and the loop goes on, so one request cannot stop the server.
  thread_ = std::thread([this] {
    for (;;) {
      try {
        impl_->ioc.run();
        return;
      } catch (const std::exception& e) {
        log_warn("http: internal error on the I/O thread (the server goes on): {}", e.what());
      }
    }
  });
}

void HttpServer::post(std::function<void()> f) { net::post(impl_->ioc, std::move(f)); }

void HttpServer::after(double seconds, std::function<void()> f) {
  auto timer = std::make_shared<net::steady_timer>(impl_->ioc, ms(seconds));
  timer->async_wait([timer, f = std::move(f)](beast::error_code ec) {
    if (!ec) f();
  });
}

void HttpServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  net::post(impl_->ioc, [this] {
    for (auto& a : impl_->acceptors) {
      beast::error_code ec;
      a->close(ec);
    }
  });
  impl_->work.reset();
  impl_->ioc.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace ponder::server
