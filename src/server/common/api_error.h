// ApiError: a refusal in OpenAI's error shape ({"error": {"message", "type", "param", "code"}})
// with its HTTP status. Every API family answers errors this way (llama-server does too), so a
// client sees the same fields whichever route it called.
// Depends on nlohmann-json only.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ponder::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the request field at fault, if any
  std::string code;   // e.g. "context_length_exceeded"

  nlohmann::json to_json() const;
  static ApiError bad_request(std::string message, std::string param = "");
  static ApiError not_found(std::string message);
  // 404 for a `model` no model of the server answers to (code model_not_found, param model).
  static ApiError model_not_found(const std::string& name);
  static ApiError unauthorized();
  static ApiError unsupported(const std::string& param, const std::string& what);
  static ApiError busy(std::string message);      // 503, with Retry-After
  static ApiError internal(std::string message);  // 500
};

}  // namespace ponder::server
