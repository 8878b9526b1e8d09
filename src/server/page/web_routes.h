// The chat page (web/, bundled by web/build.mjs and embedded in the binary): GET / and its
// hashed assets, gzip-compressed when the client accepts it, with ETag revalidation, long cache
// lifetimes for the hashed files and a Content-Security-Policy that lets only the page's own
// scripts run. Public routes: the page asks for the API key when the API answers 401.
// Depends on server/transport/router.h.
#pragma once

#include <string_view>

#include "server/transport/router.h"

namespace ponder::server {

void add_web_routes(Router& router);
// Whether this binary carries the page (built with web/node_modules present).
bool web_page_embedded();
// The Content-Security-Policy sent with the page.
std::string_view web_page_csp();

}  // namespace ponder::server
