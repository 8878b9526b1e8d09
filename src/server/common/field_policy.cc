#include "server/common/field_policy.h"

#include <fmt/core.h>

#include <algorithm>

namespace ponder::server {

using nlohmann::json;

bool FieldPolicy::knows(std::string_view name) const {
  if (std::find(honoured.begin(), honoured.end(), name) != honoured.end()) return true;
  for (const FixedField& x : fixed)
    if (x.name == name) return true;
  for (const RefusedField& x : refused)
    if (x.name == name) return true;
  return false;
}

void FieldPolicy::check(FieldReader& f, const json& body, std::string_view where) const {
  if (!body.is_object()) return;
  for (const FixedField& x : fixed) {
    auto it = body.find(std::string(x.name));
    if (it == body.end() || it->is_null() || *it == x.value) continue;
    const std::string name = fmt::format("{}{}", where, x.name);
    return f.fail(ApiError::unsupported(name, fmt::format("'{}' = {} ({}; only {} is taken)", name,
                                                          it->dump(), x.why, x.value.dump())));
  }
  for (const RefusedField& x : refused) {
    auto it = body.find(std::string(x.name));
    if (it == body.end() || it->is_null()) continue;
    const std::string name = fmt::format("{}{}", where, x.name);
    ApiError e = ApiError::unsupported(name, fmt::format("'{}'", name));
    if (!x.instead.empty()) e.message += fmt::format(" ({})", x.instead);
    return f.fail(e);
  }
}

std::vector<std::string> FieldPolicy::unknown(const json& body, std::string_view where) const {
  std::vector<std::string> out;
  if (!body.is_object()) return out;
  for (const auto& [name, value] : body.items())
    if (!knows(name)) out.push_back(fmt::format("{}{}", where, name));
  return out;
}

std::string join_names(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace ponder::server
