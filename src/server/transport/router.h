// Router: method + path -> route handler, with what every route shares: the API key check
// (constant-time; public routes are only the health probes and the page's files), the CORS
// allowlist (an Origin is echoed back only when listed; never "any origin"), preflight
// requests, 404 and 405 in OpenAI's error shape unless the path's family registered its own
// (Ollama's {"error": "..."} under /api/, Anthropic's under /v1/messages). Routes match the exact
// path, else the longest registered prefix (/v1/models/{id}). The query string is not part of
// the path.
// Depends on server/transport/http_server.h, server/transport/reply.h.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <map>
#include <string>
#include <vector>

#include "server/common/api_error.h"
#include "server/transport/http_server.h"

namespace ponder::server {

struct AccessConfig {
  std::string api_key;                    // empty: no key needed
  std::vector<std::string> cors_origins;  // exact origins allowed to call from a browser
};

class Router {
 public:
  using Handler = std::function<void(HttpRequest&& req, std::shared_ptr<Responder> r)>;
  explicit Router(AccessConfig access) : access_(std::move(access)) {}

  // How an API family answers errors (its own JSON shape).
  using ErrorReply = std::function<void(Responder& r, const ApiError& e)>;

  void add(boost::beast::http::verb method, const std::string& path, Handler h,
           bool is_public = false);
  // Every path that starts with prefix and has no exact route (the handler reads the rest).
  void add_prefix(boost::beast::http::verb method, const std::string& prefix, Handler h);
  // The error shape of the router's own refusals (404, 405, 401, 500) under a path prefix.
  void set_error_shape(const std::string& prefix, ErrorReply reply);
  void handle(HttpRequest&& req, std::shared_ptr<Responder> r) const;

 private:
  struct Route {
    Handler handler;
    bool is_public = false;
  };
  using Methods = std::map<boost::beast::http::verb, Route>;
  bool authorized(const HttpRequest& req) const;
  const Methods* find(const std::string& path) const;
  void refuse(Responder& r, const std::string& path, const ApiError& e) const;
  AccessConfig access_;
  std::map<std::string, Methods> routes_;           // path -> method
  std::map<std::string, Methods> prefix_routes_;    // prefix -> method
  std::map<std::string, ErrorReply> error_shapes_;  // prefix -> how to answer
};

// Equal strings, in time that depends only on their lengths.
bool constant_time_equal(const std::string& a, const std::string& b);
// The path of a request target, without its query string.
std::string target_path(const HttpRequest& req);
// A header's value ("" when absent).
std::string header_value(const HttpRequest& req, const std::string& name);
// A query parameter's value ("" when absent).
std::string query_param(const HttpRequest& req, const std::string& name);

}  // namespace ponder::server
