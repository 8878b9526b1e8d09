#include "server/common/api_error.h"

namespace ponder::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", e}};
}

ApiError ApiError::bad_request(std::string message, std::string param) {
  return {400, std::move(message), "invalid_request_error", std::move(param), ""};
}

ApiError ApiError::not_found(std::string message) {
  return {404, std::move(message), "not_found_error", "", "not_found"};
}

ApiError ApiError::model_not_found(const std::string& name) {
  return {404, "The model '" + name + "' does not exist", "not_found_error", "model",
          "model_not_found"};
}

ApiError ApiError::unauthorized() {
  return {401, "a valid API key is required (Authorization: Bearer KEY)", "authentication_error",
          "", "invalid_api_key"};
}

ApiError ApiError::unsupported(const std::string& param, const std::string& what) {
  return {400, what + " is not supported by this server", "invalid_request_error", param,
          "unsupported_parameter"};
}

ApiError ApiError::busy(std::string message) {
  return {503, std::move(message), "server_busy", "", "server_busy"};
}

ApiError ApiError::internal(std::string message) {
  return {500, std::move(message), "server_error", "", "internal_error"};
}

}  // namespace ponder::server
