#include "server/common/request_fields.h"

#include <fmt/core.h>

#include "grammar/json_schema.h"

namespace ponder::server {

using nlohmann::json;

namespace {
constexpr size_t kMaxStops = 16;
}  // namespace

// Sets the constraint of a request from a JSON Schema, or fails naming the field.
void constrain_to_schema(FieldReader& f, const json& schema, const std::string& field,
                         GenerationRequest* out) {
  auto gbnf = grammar::json_schema_to_gbnf(schema);
  if (!gbnf.has_value())
    return f.fail(
        ApiError::bad_request(fmt::format("'{}': {}", field, gbnf.status().message()), field));
  out->grammar = std::move(*gbnf);
  out->grammar_field = field;
}

// response_format (OpenAI), grammar and json_schema (llama.cpp): at most one of them.
void read_constraint(FieldReader& f, const json& body, GenerationRequest* out) {
  int n = 0;
  for (const char* name : {"response_format", "grammar", "json_schema"})
    n += f.has(name) && !body[name].is_null();
  if (n > 1)
    return f.fail(ApiError::bad_request(
        "send only one of 'response_format', 'grammar' and 'json_schema'", "response_format"));
  if (f.has("response_format") && !body["response_format"].is_null()) {
    const json& rf = body["response_format"];
    const json* type = rf.is_object() ? &rf["type"] : nullptr;
    if (type == nullptr || !type->is_string()) {
      return f.fail(ApiError::bad_request(
          "'response_format' must be an object with a string 'type'", "response_format"));
    }
    if (*type == "json_object") {
      out->grammar = grammar::json_object_gbnf();
      out->grammar_field = "response_format";
    } else if (*type == "json_schema") {
      auto js = rf.find("json_schema");
      if (js == rf.end() || !js->is_object() || !js->contains("schema") ||
          !((*js)["schema"].is_object() || (*js)["schema"].is_boolean())) {
        return f.fail(ApiError::bad_request(
            "'response_format.json_schema.schema' must be a JSON Schema object",
            "response_format"));
      }
      constrain_to_schema(f, (*js)["schema"], "response_format", out);
    } else if (*type != "text") {
      f.fail(ApiError::bad_request(
          fmt::format("'response_format.type' is '{}'; it must be text, json_object or json_schema",
                      type->get<std::string>()),
          "response_format"));
    }
  }
  if (auto g = f.string("grammar")) {
    out->grammar = *g;
    out->grammar_field = "grammar";
  }
  if (f.has("json_schema") && !body["json_schema"].is_null()) {
    const json& js = body["json_schema"];
    if (!js.is_object() && !js.is_boolean())
      return f.fail(
          ApiError::bad_request("'json_schema' must be a JSON Schema object", "json_schema"));
    constrain_to_schema(f, js, "json_schema", out);
  }
}

bool apply_reasoning_effort(const std::string& effort, const ServingDefaults& d,
                            GenerationRequest* out) {
  if (effort == "none" || effort == "minimal") {
    out->thinking = false;
  } else if (effort == "low") {
    out->options.reasoning_budget = d.efforts.low;
  } else if (effort == "medium") {
    out->options.reasoning_budget = d.efforts.medium;
  } else if (effort == "high" || effort == "xhigh" || effort == "max") {  // DeepSeek's top two
    out->options.reasoning_budget = d.efforts.high;
  } else {
    return false;
  }
  return true;
}

bool read_sampling(FieldReader& f, GenerateOptions* o) {
  SamplerParams& s = o->sampling;
  if (auto v = f.number("temperature", 0, 5)) s.temperature = static_cast<float>(*v);
  if (auto v = f.number("top_p", 0, 1)) {
    if (*v == 0) {
      f.fail(ApiError::bad_request("'top_p' is 0; it must be above 0 (1 turns it off)", "top_p"));
    } else {
      s.top_p = static_cast<float>(*v);
    }
  }
  if (auto v = f.integer("top_k", 0, 1 << 20)) s.top_k = static_cast<int32_t>(*v);
  if (auto v = f.number("min_p", 0, 1)) s.min_p = static_cast<float>(*v);
  if (auto v = f.number("presence_penalty", -2, 2)) s.presence_penalty = static_cast<float>(*v);
  if (auto v = f.number("frequency_penalty", -2, 2)) s.frequency_penalty = static_cast<float>(*v);
  for (const char* name : {"repeat_penalty", "repetition_penalty"}) {
    if (auto v = f.number(name, 0, 10)) {
      if (*v == 0) {
        f.fail(ApiError::bad_request(
            fmt::format("'{}' is 0; it must be above 0 (1 turns it off)", name), name));
      } else {
        s.repeat_penalty = static_cast<float>(*v);
      }
    }
  }
  if (auto v = f.integer("repeat_last_n", 0, 1 << 20)) s.penalty_last_n = static_cast<int32_t>(*v);
  bool seed_given = false;
  if (auto v = f.integer("seed", INT64_MIN, INT64_MAX)) {
    s.seed = static_cast<uint64_t>(*v);
    seed_given = true;
  }
  if (auto v = f.strings("stop", kMaxStops)) {
    for (const std::string& x : *v) {
      if (x.empty()) {
        f.fail(ApiError::bad_request("'stop' holds an empty string", "stop"));
        break;
      }
    }
    o->stop = *v;
  }
  return seed_given;
}

}  // namespace ponder::server
