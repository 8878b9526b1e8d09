#include "server/server_test_support.h"

namespace ponder::server {

Reply call(uint16_t port, http::verb method, const std::string& target, const std::string& body,
           std::vector<std::pair<std::string, std::string>> headers) {
  net::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
  http::request<http::string_body> req{method, target, 11};
  req.set(http::field::host, "127.0.0.1");
  if (!body.empty()) req.set(http::field::content_type, "application/json");
  for (auto& [k, v] : headers) req.set(k, v);
  req.body() = body;
  req.prepare_payload();
  http::write(s, req);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> p;
  p.body_limit(64u << 20);
  http::read(s, buf, p);
  Reply r;
  r.status = static_cast<int>(p.get().result_int());
  r.body = p.get().body();
  for (const auto& f : p.get()) r.headers[std::string(f.name_string())] = std::string(f.value());
  return r;
}

}  // namespace ponder::server
