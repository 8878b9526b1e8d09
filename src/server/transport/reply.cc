#include "server/transport/reply.h"

#include "server/openai/openai_protocol.h"

namespace ponder::server {

void reply_json(Responder& r, int status, const nlohmann::json& body) {
  r.send(status, "application/json", dump(body));
}

void reply_error(Responder& r, const ApiError& e) {
  HttpHeaders headers;
  if (e.status == 503 || e.status == 429) headers.emplace_back("Retry-After", "1");
  r.send(e.status, "application/json", dump(e.to_json()), headers);
}

std::optional<nlohmann::json> parse_json_body(const HttpRequest& req, Responder& r) {
  nlohmann::json j = nlohmann::json::parse(req.body(), nullptr, false);
  if (j.is_discarded()) {
    reply_error(r, ApiError::bad_request("the request body is not valid JSON"));
    return std::nullopt;
  }
  return j;
}

}  // namespace ponder::server
