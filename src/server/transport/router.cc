#include "server/transport/router.h"

#include <algorithm>

#include "base/log.h"
#include "server/transport/reply.h"

namespace ponder::server {

namespace http = boost::beast::http;

bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

std::string target_path(const HttpRequest& req) {
  const std::string t(req.target());
  return t.substr(0, t.find('?'));
}

std::string header_value(const HttpRequest& req, const std::string& name) {
  auto it = req.find(name);
  return it == req.end() ? "" : std::string(it->value());
}

std::string query_param(const HttpRequest& req, const std::string& name) {
  const std::string t(req.target());
  size_t q = t.find('?');
  while (q != std::string::npos) {
    const size_t start = q + 1;
    const size_t end = t.find('&', start);
    const std::string kv =
        t.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const size_t eq = kv.find('=');
    if (kv.substr(0, eq) == name) return eq == std::string::npos ? "" : kv.substr(eq + 1);
    q = end;
  }
  return "";
}

void Router::add(http::verb method, const std::string& path, Handler h, bool is_public) {
  routes_[path][method] = Route{std::move(h), is_public};
}

void Router::add_prefix(http::verb method, const std::string& prefix, Handler h) {
  prefix_routes_[prefix][method] = Route{std::move(h), false};
}

void Router::set_error_shape(const std::string& prefix, ErrorReply reply) {
  error_shapes_[prefix] = std::move(reply);
}

namespace {
// The entry of a prefix-keyed map with the longest key that starts path (null when none does).
template <typename Map>
const typename Map::mapped_type* longest_prefix(const Map& m, const std::string& path) {
  const typename Map::mapped_type* best = nullptr;
  size_t best_len = 0;
  for (const auto& [prefix, value] : m) {
    if (path.starts_with(prefix) && prefix.size() >= best_len) {
      best = &value;
      best_len = prefix.size();
    }
  }
  return best;
}
}  // namespace

const Router::Methods* Router::find(const std::string& path) const {
  if (auto p = routes_.find(path); p != routes_.end()) return &p->second;
  return longest_prefix(prefix_routes_, path);
}

void Router::refuse(Responder& r, const std::string& path, const ApiError& e) const {
  if (const ErrorReply* shape = longest_prefix(error_shapes_, path)) return (*shape)(r, e);
  reply_error(r, e);
}

bool Router::authorized(const HttpRequest& req) const {
  if (access_.api_key.empty()) return true;
  std::string given;
  if (auto it = req.find(http::field::authorization); it != req.end()) {
    const std::string v(it->value());
    if (v.rfind("Bearer ", 0) == 0) given = v.substr(7);
  } else if (auto x = req.find("x-api-key"); x != req.end()) {
    given = std::string(x->value());
  }
  return constant_time_equal(given, access_.api_key);
}

void Router::handle(HttpRequest&& req, std::shared_ptr<Responder> r) const {
  // CORS: an allowed Origin is echoed on every answer; others get no CORS headers at all.
  bool cors_ok = false;
  if (auto it = req.find(http::field::origin); it != req.end()) {
    const std::string origin(it->value());
    cors_ok = std::find(access_.cors_origins.begin(), access_.cors_origins.end(), origin) !=
              access_.cors_origins.end();
    if (cors_ok) {
      r->add_header("Access-Control-Allow-Origin", origin);
      r->add_header("Vary", "Origin");
    }
  }
  const std::string path = target_path(req);
  const Methods* p = find(path);
  if (req.method() == http::verb::options) {
    HttpHeaders h;
    if (cors_ok) {
      // An allowed origin may send the headers its SDK adds (openai's and Anthropic's
      // x-stainless-*, anthropic-version, ...): the ones the preflight asks for are allowed.
      std::string asked = header_value(req, "access-control-request-headers");
      h = {{"Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS"},
           {"Access-Control-Allow-Headers",
            asked.empty() ? "Authorization, Content-Type, X-Api-Key, X-Conversation-Id, "
                            "X-Ponder-Route-Key, X-Ponder-Replica"
                          : asked},
           {"Access-Control-Max-Age", "600"}};
      if (!asked.empty()) h.push_back({"Vary", "Access-Control-Request-Headers"});
    }
    r->send(204, "", "", h);
    return;
  }
  if (p == nullptr) return refuse(*r, path, ApiError::not_found("no route for " + path));
  auto m = p->find(req.method());
  if (m == p->end()) {
    std::string allow;
    for (const auto& [verb, route] : *p)
      allow += (allow.empty() ? "" : ", ") + std::string(http::to_string(verb));
    ApiError e{405,
               std::string(req.method_string()) + " is not allowed on " + path +
                   " (allowed: " + allow + ")",
               "invalid_request_error", "", "method_not_allowed"};
    r->add_header("Allow", allow);
    return refuse(*r, path, e);
  }
  if (!m->second.is_public && !authorized(req)) return refuse(*r, path, ApiError::unauthorized());
  // A handler answers its errors; an exception from one is a bug, answered as a 500 (or the stream
  // ended) and logged, and the server goes on.
  std::shared_ptr<Responder> keep = r;
  try {
    m->second.handler(std::move(req), std::move(r));
  } catch (const std::exception& e) {
    log_warn("http: internal error on {}: {}", path, e.what());
    if (keep->started()) return keep->end();
    refuse(*keep, path,
           ApiError{500, std::string("internal error: ") + e.what(), "server_error", "",
                    "internal_error"});
  }
}

}  // namespace ponder::server
