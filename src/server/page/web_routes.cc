#include "server/page/web_routes.h"

#include <cstddef>
#include <string>

#ifdef PONDER_WEB_PAGE
#include "web_assets_decl.inc"
#endif

namespace ponder::server {
namespace http = boost::beast::http;

namespace {

struct WebAsset {
  const char* path;
  const char* content_type;
  const char* etag;
  bool immutable;  // a content-hashed name: cached for a year
  const unsigned char* raw;
  const unsigned char* raw_end;
  const unsigned char* gzip;
  const unsigned char* gzip_end;
};

#ifdef PONDER_WEB_PAGE
const WebAsset kAssets[] = {
#include "web_assets.inc"
};
#endif

// KaTeX sets inline styles (style-src 'unsafe-inline'); no script runs but the bundle.
constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; font-src 'self'; "
    "img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

bool accepts_gzip(const HttpRequest& req) {
  auto it = req.find(http::field::accept_encoding);
  return it != req.end() && it->value().find("gzip") != boost::beast::string_view::npos;
}

void serve(const WebAsset& a, const HttpRequest& req, Responder& r) {
  HttpHeaders h = {
      {"ETag", a.etag},
      {"Cache-Control", a.immutable ? "public, max-age=31536000, immutable" : "no-cache"},
      {"Vary", "Accept-Encoding"},
      {"X-Content-Type-Options", "nosniff"}};
  if (!a.immutable) {
    h.emplace_back("Content-Security-Policy", std::string(kCsp));
    h.emplace_back("Referrer-Policy", "no-referrer");
    h.emplace_back("X-Frame-Options", "DENY");
  }
  if (auto inm = req.find(http::field::if_none_match); inm != req.end() && inm->value() == a.etag) {
    return r.send(304, "", "", std::move(h));
  }
  const bool gz = accepts_gzip(req);
  const unsigned char* begin = gz ? a.gzip : a.raw;
  const unsigned char* end = gz ? a.gzip_end : a.raw_end;
  if (gz) h.emplace_back("Content-Encoding", "gzip");
  r.send(200, a.content_type,
         std::string(reinterpret_cast<const char*>(begin), static_cast<size_t>(end - begin)),
         std::move(h));
}

}  // namespace

bool web_page_embedded() {
#ifdef PONDER_WEB_PAGE
  return true;
#else
  return false;
#endif
}

std::string_view web_page_csp() { return kCsp; }

void add_web_routes(Router& router) {
#ifdef PONDER_WEB_PAGE
  for (const WebAsset& a : kAssets) {
    router.add(
        http::verb::get, a.path,
        [&a](HttpRequest&& req, std::shared_ptr<Responder> r) { serve(a, req, *r); }, true);
  }
#else
  router.add(
      http::verb::get, "/",
      [](HttpRequest&&, std::shared_ptr<Responder> r) {
        r->send(200, "text/html; charset=utf-8",
                "<!doctype html><title>Ponder</title><p>This ponder was built without its web "
                "page: run "
                "<code>npm ci --prefix web</code> (scripts/setup.sh does) and build again. The API "
                "is served as usual.</p>");
      },
      true);
#endif
}

}  // namespace ponder::server
