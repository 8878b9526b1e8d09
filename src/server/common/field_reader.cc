#include "server/common/field_reader.h"

#include <fmt/core.h>

#include <cmath>

namespace ponder::server {

std::string json_type_name(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

const nlohmann::json* FieldReader::get(const char* name) const {
  if (!j_.is_object()) return nullptr;
  auto it = j_.find(name);
  if (it == j_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool FieldReader::has(const char* name) const { return get(name) != nullptr; }

void FieldReader::fail(ApiError e) {
  if (!error_) error_ = std::move(e);
}

void FieldReader::wrong(const char* name, const std::string& expected) {
  const nlohmann::json* v = get(name);
  fail(ApiError::bad_request(
      fmt::format("'{}' must be {}, not {}", name, expected, v ? json_type_name(*v) : "null"),
      name));
}

std::optional<double> FieldReader::number(const char* name, double lo, double hi) {
  const nlohmann::json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) {
    wrong(name, "a number");
    return std::nullopt;
  }
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi) {
    fail(ApiError::bad_request(
        fmt::format("'{}' is {}; it must be between {} and {}", name, x, lo, hi), name));
    return std::nullopt;
  }
  return x;
}

std::optional<int64_t> FieldReader::integer(const char* name, int64_t lo, int64_t hi) {
  const nlohmann::json* v = get(name);
  if (v == nullptr) return std::nullopt;
  int64_t x = 0;
  if (v->is_number_unsigned()) {
    const uint64_t u = v->get<uint64_t>();
    x = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (v->is_number_integer()) {
    x = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    x = static_cast<int64_t>(v->get<double>());  // 64.0 is an integer in JSON's eyes
  } else {
    wrong(name, "an integer");
    return std::nullopt;
  }
  if (x < lo || x > hi) {
    fail(ApiError::bad_request(
        fmt::format("'{}' is {}; it must be between {} and {}", name, x, lo, hi), name));
    return std::nullopt;
  }
  return x;
}

std::optional<bool> FieldReader::boolean(const char* name) {
  const nlohmann::json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) {
    wrong(name, "a boolean");
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(const char* name) {
  const nlohmann::json* v = get(name);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) {
    wrong(name, "a string");
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> FieldReader::strings(const char* name, size_t max_items) {
  const nlohmann::json* v = get(name);
  if (v == nullptr) return std::nullopt;
  std::vector<std::string> out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    for (const auto& s : *v) {
      if (!s.is_string()) {
        wrong(name, "a string or an array of strings");
        return std::nullopt;
      }
      out.push_back(s.get<std::string>());
    }
  } else {
    wrong(name, "a string or an array of strings");
    return std::nullopt;
  }
  if (out.size() > max_items) {
    fail(ApiError::bad_request(
        fmt::format("'{}' has {} entries; at most {}", name, out.size(), max_items), name));
    return std::nullopt;
  }
  return out;
}

}  // namespace ponder::server
