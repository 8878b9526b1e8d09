// Router: method + path -> route handler, with what every route shares: the API key check
// (constant-time; public routes are only the health probes and the page's files), the CORS
// allowlist (an Origin is echoed back only when listed; never "any origin"), preflight
// requests, 404 and 405 in OpenAI's error shape. The query string is not part of the path.
// Depends on server/transport/http_server.h, server/transport/reply.h.
#pragma once

#include <boost/beast/http/verb.hpp>
#include <map>
#include <string>
#include <vector>

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

  void add(boost::beast::http::verb method, const std::string& path, Handler h,
           bool is_public = false);
  void handle(HttpRequest&& req, std::shared_ptr<Responder> r) const;

 private:
  struct Route {
    Handler handler;
    bool is_public = false;
  };
  bool authorized(const HttpRequest& req) const;
  AccessConfig access_;
  std::map<std::string, std::map<boost::beast::http::verb, Route>> routes_;  // path -> method
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
