// What a route does with each field its API documents, so that none is dropped silently:
// honoured (the parser reads it), fixed (taken only at the value that leaves Ponder's behaviour
// as it is: a sampler that is off, no GPU), refused (a 400 naming it and what to send instead).
// A field the route does not know at all is ignored where the API itself ignores unknown fields
// (OpenAI-compatible servers, Ollama), and named in the answer's X-Ponder-Ignored-Fields header
// and the log, never in silence. docs/server.md has the rule and the tables.
// Depends on server/common/field_reader.h.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/common/field_reader.h"

namespace ponder::server {

// Taken only at `value`; any other value is refused with `why`.
struct FixedField {
  std::string_view name;
  nlohmann::json value;
  std::string_view why;  // "Ponder has no GPU", "typical sampling is not implemented", ...
};

// Refused whenever present (not null): `instead` says what to send.
struct RefusedField {
  std::string_view name;
  std::string_view instead;
};

// A route's policy: the fields it honours (read by its parser) and the tables above.
struct FieldPolicy {
  std::vector<std::string_view> honoured;
  std::vector<FixedField> fixed;
  std::vector<RefusedField> refused;

  bool knows(std::string_view name) const;
  // Fails f on the first fixed field at another value or refused field that body holds;
  // `where` prefixes the names in messages ("options." for Ollama's options).
  void check(FieldReader& f, const nlohmann::json& body, std::string_view where = "") const;
  // The names of body's fields this policy does not know, each prefixed by `where`.
  std::vector<std::string> unknown(const nlohmann::json& body, std::string_view where = "") const;
};

// "a, b, c" for the X-Ponder-Ignored-Fields header.
std::string join_names(const std::vector<std::string>& names);

}  // namespace ponder::server
