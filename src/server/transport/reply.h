// Small helpers every route uses to answer: JSON bodies, OpenAI-shaped errors (with Retry-After
// when the server is busy), SSE framing, and parsing a JSON body with a clear 400.
// Depends on server/transport/http_server.h, server/common/api_error.h.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/common/api_error.h"
#include "server/transport/http_server.h"

namespace ponder::server {

void reply_json(Responder& r, int status, const nlohmann::json& body);
void reply_error(Responder& r, const ApiError& e);
// The body as JSON, or a 400 already sent (empty optional).
std::optional<nlohmann::json> parse_json_body(const HttpRequest& req, Responder& r);

// One server-sent event ("data: ...\n\n") and a comment line (keep-alive).
inline std::string sse_data(const std::string& data) { return "data: " + data + "\n\n"; }
inline std::string sse_comment(const std::string& text) { return ": " + text + "\n\n"; }
// A typed event ("event: TYPE\ndata: ...\n\n": Anthropic's and the Responses API's streams).
inline std::string sse_event(const std::string& type, const std::string& data) {
  return "event: " + type + "\ndata: " + data + "\n\n";
}

}  // namespace ponder::server
