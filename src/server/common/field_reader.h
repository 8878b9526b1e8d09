// FieldReader: reads the typed fields of a JSON request object and remembers the first field
// that is wrong (wrong type, out of range), naming it and what was expected. Absent and null
// fields read as "not given" (std::nullopt). Values are checked, never clamped.
// Depends on nlohmann-json and server/common/api_error.h.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/common/api_error.h"

namespace ponder::server {

class FieldReader {
 public:
  explicit FieldReader(const nlohmann::json& object) : j_(object) {}

  bool has(const char* name) const;  // present and not null
  std::optional<double> number(const char* name, double lo, double hi);
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi);
  std::optional<bool> boolean(const char* name);
  std::optional<std::string> string(const char* name);
  // A string or an array of strings (OpenAI's `stop`), at most max_items.
  std::optional<std::vector<std::string>> strings(const char* name, size_t max_items);
  // Records an error of the caller's own (the first one wins).
  void fail(ApiError e);

  bool ok() const { return !error_.has_value(); }
  const ApiError& error() const { return *error_; }

 private:
  const nlohmann::json* get(const char* name) const;
  void wrong(const char* name, const std::string& expected);
  const nlohmann::json& j_;
  std::optional<ApiError> error_;
};

// The JSON type of a value in words ("a string", "an array", ...), for error messages.
std::string json_type_name(const nlohmann::json& v);

}  // namespace ponder::server
