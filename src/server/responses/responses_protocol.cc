#include "server/responses/responses_protocol.h"

#include <fmt/core.h>

#include <algorithm>
#include <cstdlib>
#include <unordered_set>

#include "grammar/json_schema.h"
#include "grammar/tool_calls.h"
#include "server/common/field_reader.h"
#include "server/common/request_fields.h"
#include "server/openai/openai_tools.h"

namespace ponder::server {

using nlohmann::json;

namespace {

// The fields OpenAI defines for POST /v1/responses that Ponder reads, and Ponder's own extensions
// (the sampling fields of the other routes, reasoning_budget, cache). Anything else is refused as
// OpenAI refuses it: "Unknown parameter".
const std::unordered_set<std::string>& known_fields() {
  static const std::unordered_set<std::string> k = {
      // OpenAI's, read or refused below
      "model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "reasoning",
      "text", "tools", "tool_choice", "parallel_tool_calls", "stream", "stream_options",
      "previous_response_id", "store", "metadata", "user", "include", "truncation", "service_tier",
      "background", "prompt_cache_key", "prompt_cache_retention", "safety_identifier",
      "conversation", "prompt", "max_tool_calls", "top_logprobs", "context_management",
      "moderation", "prompt_cache_options",
      // Ponder's extensions
      "seed", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repeat_penalty",
      "repetition_penalty", "repeat_last_n", "stop", "reasoning_budget", "cache", "ignore_eos"};
  return k;
}

// A string member of an object, or "" when absent or not a string.
std::string str_or_empty(const json& j, const char* key) {
  if (!j.is_object()) return "";
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// A float as a double with its shortest decimal form (0.95f echoes as 0.95, not 0.9499999...).
double as_written(float x) { return std::strtod(fmt::format("{}", x).c_str(), nullptr); }

ApiError unknown_parameter(const std::string& name) {
  ApiError e = ApiError::bad_request(fmt::format("Unknown parameter: '{}'.", name), name);
  e.code = "unknown_parameter";
  return e;
}

// Fields OpenAI defines that Ponder does not implement: refused by name, never ignored.
void refuse_unsupported(FieldReader& f, const json& body) {
  for (const char* name : {"conversation", "prompt", "max_tool_calls", "context_management",
                           "moderation", "prompt_cache_options"}) {
    if (f.has(name)) f.fail(ApiError::unsupported(name, fmt::format("'{}'", name)));
  }
  if (auto v = f.boolean("background"); v && *v)
    f.fail(ApiError::unsupported("background", "'background': true"));
  if (auto v = f.string("service_tier"); v && *v != "auto" && *v != "default")
    f.fail(ApiError::unsupported("service_tier", fmt::format("'service_tier' '{}'", *v)));
  if (auto v = f.integer("top_logprobs", 0, 20); v && *v > 0)
    f.fail(ApiError::unsupported("top_logprobs", "'top_logprobs' above 0"));
  if (auto v = f.string("truncation"); v && *v != "disabled")
    f.fail(ApiError::unsupported("truncation", fmt::format("'truncation' '{}'", *v)));
  // include: none of its values has anything to add here (no encrypted reasoning, logprobs, or
  // results of built-in tools); an empty list is fine.
  if (f.has("include")) {
    const json& inc = body["include"];
    if (!inc.is_array() ||
        !std::all_of(inc.begin(), inc.end(), [](const json& v) { return v.is_string(); })) {
      f.fail(ApiError::bad_request("'include' must be an array of strings", "include"));
    } else if (!inc.empty()) {
      f.fail(ApiError::unsupported(
          "include", fmt::format("'include' of '{}'", inc.front().get<std::string>())));
    }
  }
}

// The text of a message's content: a string, or parts of the given text types.
std::optional<std::string> content_text(FieldReader& f, const json& item, const std::string& at,
                                        bool assistant) {
  auto it = item.find("content");
  if (it == item.end() || it->is_null()) {
    f.fail(ApiError::bad_request(fmt::format("'{}.content' is required", at), at + ".content"));
    return std::nullopt;
  }
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    f.fail(ApiError::bad_request(
        fmt::format("'{}.content' must be a string or an array of content parts, not {}", at,
                    json_type_name(*it)),
        at + ".content"));
    return std::nullopt;
  }
  std::string text;
  for (size_t k = 0; k < it->size(); ++k) {
    const json& part = (*it)[k];
    const std::string where = fmt::format("{}.content[{}]", at, k);
    const std::string type = str_or_empty(part, "type");
    const bool is_text =
        type == "input_text" || type == "output_text" || (assistant && type == "refusal");
    if (!is_text) {
      f.fail(type.empty() || type.rfind("input_", 0) != 0
                 ? ApiError::bad_request(
                       fmt::format("'{}.type' is '{}'; it must be input_text or output_text", where,
                                   type),
                       where + ".type")
                 : ApiError::unsupported(where + ".type",
                                         fmt::format("a content part of type '{}'", type)));
      return std::nullopt;
    }
    const char* field = type == "refusal" ? "refusal" : "text";
    if (!part.contains(field) || !part[field].is_string()) {
      f.fail(ApiError::bad_request(fmt::format("'{}.{}' must be a string", where, field),
                                   fmt::format("{}.{}", where, field)));
      return std::nullopt;
    }
    text += part[field].get<std::string>();
  }
  return text;
}

std::optional<std::string> string_field(FieldReader& f, const json& item, const std::string& at,
                                        const char* name) {
  auto it = item.find(name);
  if (it == item.end() || !it->is_string()) {
    f.fail(ApiError::bad_request(fmt::format("'{}.{}' must be a string", at, name),
                                 fmt::format("{}.{}", at, name)));
    return std::nullopt;
  }
  return it->get<std::string>();
}

// Items (input, or a stored conversation) into chat messages. `call_ids` gathers the calls made,
// so that every function_call_output answers an earlier one.
void read_items(FieldReader& f, const json& items, const std::string& field,
                std::unordered_set<std::string>* call_ids, std::vector<text::ChatMessage>* out) {
  for (size_t i = 0; i < items.size() && f.ok(); ++i) {
    const json& item = items[i];
    const std::string at = fmt::format("{}[{}]", field, i);
    if (!item.is_object()) {
      return f.fail(ApiError::bad_request(fmt::format("'{}' must be an object", at), at));
    }
    std::string type = item.contains("type") && item["type"].is_string()
                           ? item["type"].get<std::string>()
                           : (item.contains("role") ? "message" : "");
    if (type == "message") {
      const auto role = string_field(f, item, at, "role");
      if (!role) return;
      if (*role != "user" && *role != "system" && *role != "developer" && *role != "assistant") {
        return f.fail(ApiError::bad_request(
            fmt::format("'{}.role' is '{}'; it must be user, system, developer or assistant", at,
                        *role),
            at + ".role"));
      }
      auto text = content_text(f, item, at, *role == "assistant");
      if (!text) return;
      out->push_back({*role == "developer" ? "system" : *role, std::move(*text)});
    } else if (type == "function_call") {
      const auto call_id = string_field(f, item, at, "call_id");
      const auto name = call_id ? string_field(f, item, at, "name") : std::nullopt;
      const auto args = name ? string_field(f, item, at, "arguments") : std::nullopt;
      if (!args) return;
      // Calls join the assistant turn they follow (R1 writes a turn's calls as one block).
      if (out->empty() || out->back().role != "assistant") out->push_back({"assistant", ""});
      out->back().tool_calls.push_back({*name, *args, *call_id});
      call_ids->insert(*call_id);
    } else if (type == "function_call_output") {
      const auto call_id = string_field(f, item, at, "call_id");
      if (!call_id) return;
      if (!call_ids->count(*call_id)) {
        return f.fail(ApiError::bad_request(
            fmt::format("'{}.call_id' is '{}', which no earlier function_call has", at, *call_id),
            at + ".call_id"));
      }
      std::optional<std::string> output;
      if (item.contains("output") && item["output"].is_array()) {
        json as_message = {{"content", item["output"]}};
        output = content_text(f, as_message, at + ".output", false);
      } else {
        output = string_field(f, item, at, "output");
      }
      if (!output) return;
      out->push_back({"tool", std::move(*output), {}, *call_id});
    } else if (type == "reasoning") {
      // Dropped: R1's template removes earlier turns' thinking from the prompt.
    } else if (type.empty()) {
      return f.fail(ApiError::bad_request(
          fmt::format("'{}' needs a 'type' (or a 'role' for a message)", at), at + ".type"));
    } else {
      return f.fail(
          ApiError::unsupported(at + ".type", fmt::format("an input item of type '{}'", type)));
    }
  }
}

// Function tools in the Responses shape ({type, name, description, parameters, strict}); the
// built-in tools (web_search, file_search, computer_use, ...) are refused by name.
std::vector<grammar::ToolFunction> read_tools(FieldReader& f, const json& tools, json* echo) {
  std::vector<grammar::ToolFunction> out;
  if (!tools.is_array()) {
    f.fail(ApiError::bad_request("'tools' must be an array of tools", "tools"));
    return out;
  }
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tools.size() && f.ok(); ++i) {
    const json& t = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    const std::string type = str_or_empty(t, "type");
    if (type.empty()) {
      f.fail(ApiError::bad_request(fmt::format("'{}' must be an object with a string 'type'", at),
                                   at + ".type"));
    } else if (type != "function") {
      f.fail(ApiError::unsupported(at + ".type", fmt::format("the built-in tool '{}'", type)));
    } else if (!t.contains("name") || !t["name"].is_string() || t["name"] == "") {
      f.fail(ApiError::bad_request(fmt::format("'{}.name' must be a non-empty string", at),
                                   at + ".name"));
    } else if (!names.insert(t["name"].get<std::string>()).second) {
      f.fail(ApiError::bad_request(
          fmt::format("'{}.name': '{}' names two tools", at, t["name"].get<std::string>()),
          at + ".name"));
    } else if (t.contains("parameters") && !t["parameters"].is_null() &&
               !t["parameters"].is_object()) {
      f.fail(ApiError::bad_request(fmt::format("'{}.parameters' must be a JSON Schema object", at),
                                   at + ".parameters"));
    } else if (t.contains("description") && !t["description"].is_null() &&
               !t["description"].is_string()) {
      f.fail(ApiError::bad_request(fmt::format("'{}.description' must be a string", at),
                                   at + ".description"));
    }
    if (!f.ok()) break;
    grammar::ToolFunction tf;
    tf.name = t["name"].get<std::string>();
    tf.description = t.contains("description") && t["description"].is_string()
                         ? t["description"].get<std::string>()
                         : "";
    const json params = t.value("parameters", json(nullptr));
    if (params.is_object() && !params.empty()) tf.parameters = params;
    echo->push_back({{"type", "function"},
                     {"name", tf.name},
                     {"description", t.contains("description") ? t["description"] : json(nullptr)},
                     {"parameters", params},
                     {"strict", t.value("strict", json(true))}});
    out.push_back(std::move(tf));
  }
  return out;
}

void read_tool_choice(FieldReader& f, const json& body,
                      const std::vector<grammar::ToolFunction>& tools, GenerationRequest* g,
                      json* settings) {
  const json tc = body.value("tool_choice", json("auto"));
  (*settings)["tool_choice"] = tc;
  (*settings)["parallel_tool_calls"] = true;
  const bool parallel = f.boolean("parallel_tool_calls").value_or(true);
  (*settings)["parallel_tool_calls"] = parallel;
  if (tools.empty()) {
    if (f.has("tool_choice") && tc != "none" && tc != "auto")
      f.fail(ApiError::bad_request("'tool_choice' needs 'tools'", "tool_choice"));
    return;
  }
  grammar::ToolChoiceMode mode = grammar::ToolChoiceMode::kAuto;
  std::string named;
  if (tc == "none") return;  // the model answers in text, as without tools
  if (tc == "required") {
    mode = grammar::ToolChoiceMode::kRequired;
  } else if (str_or_empty(tc, "type") == "function") {
    if (!tc.contains("name") || !tc["name"].is_string())
      return f.fail(ApiError::bad_request("'tool_choice.name' must be a string", "tool_choice"));
    mode = grammar::ToolChoiceMode::kNamed;
    named = tc["name"].get<std::string>();
    if (!require_named_tool(f, tools, named)) return;
  } else if (tc.is_object() && tc.contains("type") && tc["type"].is_string()) {
    return f.fail(ApiError::unsupported(
        "tool_choice", fmt::format("'tool_choice' of type '{}'", tc["type"].get<std::string>())));
  } else if (tc != "auto") {
    return f.fail(ApiError::bad_request(
        "'tool_choice' must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
        "\"name\": ...}",
        "tool_choice"));
  }
  constrain_to_tools(f, tools, mode, named, parallel, g);
}

// text: {format: {type: text | json_object | json_schema}, verbosity}.
void read_text(FieldReader& f, const json& body, GenerationRequest* g, json* settings) {
  json echo = {{"format", {{"type", "text"}}}, {"verbosity", "medium"}};
  if (f.has("text")) {
    const json& t = body["text"];
    if (!t.is_object()) return f.fail(ApiError::bad_request("'text' must be an object", "text"));
    // verbosity: accepted and echoed; R1 has no control for it.
    if (t.contains("verbosity") && !t["verbosity"].is_null()) echo["verbosity"] = t["verbosity"];
    if (t.contains("format") && !t["format"].is_null()) {
      const json& fmt_ = t["format"];
      const std::string type = str_or_empty(fmt_, "type");
      if (type == "json_object") {
        g->grammar = grammar::json_object_gbnf();
        g->grammar_field = "text.format";
      } else if (type == "json_schema") {
        if (!fmt_.contains("name") || !fmt_["name"].is_string())
          return f.fail(
              ApiError::bad_request("'text.format.name' must be a string", "text.format.name"));
        if (!fmt_.contains("schema") || !fmt_["schema"].is_object())
          return f.fail(ApiError::bad_request("'text.format.schema' must be a JSON Schema object",
                                              "text.format.schema"));
        constrain_to_schema(f, fmt_["schema"], "text.format", g);
      } else if (type != "text") {
        return f.fail(ApiError::bad_request(
            fmt::format("'text.format.type' is '{}'; it must be text, json_object or json_schema",
                        type),
            "text.format.type"));
      }
      echo["format"] = fmt_;
    }
  }
  (*settings)["text"] = echo;
}

void read_reasoning(FieldReader& f, const json& body, const ServingDefaults& d,
                    GenerationRequest* g, json* settings) {
  json echo = {{"effort", nullptr}, {"summary", nullptr}};
  if (f.has("reasoning")) {
    const json& r = body["reasoning"];
    if (!r.is_object())
      return f.fail(ApiError::bad_request("'reasoning' must be an object", "reasoning"));
    FieldReader rf(r);
    if (auto e = rf.string("effort")) {
      if (!apply_reasoning_effort(*e, d, g)) {
        return f.fail(ApiError::bad_request(
            fmt::format("'reasoning.effort' is '{}'; it must be none, minimal, low, medium or high",
                        *e),
            "reasoning.effort"));
      }
      echo["effort"] = *e;
    }
    // summary: the whole thinking is always the summary, whichever is asked.
    for (const char* name : {"summary", "generate_summary"}) {
      if (auto s = rf.string(name)) {
        if (*s != "auto" && *s != "concise" && *s != "detailed")
          return f.fail(ApiError::bad_request(
              fmt::format("'reasoning.{}' is '{}'; it must be auto, concise or detailed", name, *s),
              fmt::format("reasoning.{}", name)));
        echo["summary"] = *s;
      }
    }
    if (!rf.ok()) {
      ApiError e = rf.error();
      e.param = "reasoning." + e.param;
      return f.fail(e);
    }
  }
  (*settings)["reasoning"] = echo;
}

void read_metadata(FieldReader& f, const json& body, json* settings) {
  (*settings)["metadata"] = json::object();
  if (!f.has("metadata")) return;
  const json& m = body["metadata"];
  if (!m.is_object() || m.size() > 16)
    return f.fail(
        ApiError::bad_request("'metadata' must be an object of at most 16 keys", "metadata"));
  for (const auto& [k, v] : m.items()) {
    if (k.size() > 64 || !v.is_string() || v.get<std::string>().size() > 512)
      return f.fail(ApiError::bad_request(
          fmt::format("'metadata.{}' must be a string of at most 512 characters under a key of "
                      "at most 64",
                      k),
          "metadata"));
  }
  (*settings)["metadata"] = m;
}

// This request's input as items: a string is one user message, an item_reference the stored item
// it names (in its place). `continues`: a previous response comes first (the input may be empty).
std::optional<ApiError> resolve_input(const json& body, const ItemLookup& find_item, bool continues,
                                      json* items) {
  *items = json::array();
  auto in = body.find("input");
  if (in == body.end() || in->is_null())
    return ApiError::bad_request("'input' is required", "input");
  if (in->is_string()) {
    items->push_back({{"type", "message"},
                      {"role", "user"},
                      {"content", {{{"type", "input_text"}, {"text", *in}}}}});
    return std::nullopt;
  }
  if (!in->is_array()) {
    return ApiError::bad_request(
        fmt::format("'input' must be a string or an array of items, not {}", json_type_name(*in)),
        "input");
  }
  if (in->empty() && !continues) return ApiError::bad_request("'input' is empty", "input");
  for (size_t i = 0; i < in->size(); ++i) {
    const json& item = (*in)[i];
    if (str_or_empty(item, "type") != "item_reference") {
      items->push_back(item);
      continue;
    }
    const std::string at = fmt::format("input[{}].id", i);
    const std::string id = str_or_empty(item, "id");
    const std::optional<json> found = find_item && !id.empty() ? find_item(id) : std::nullopt;
    if (!found) {
      return ApiError::bad_request(id.empty() ? fmt::format("'{}' must be a string", at)
                                              : fmt::format("Item with id '{}' not found.", id),
                                   at);
    }
    items->push_back(*found);
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_responses_request(const json& body, const ServingDefaults& d,
                                                const ConversationLookup& lookup,
                                                ResponsesRequest* out,
                                                const ItemLookup& find_item) {
  if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  for (const auto& [name, value] : body.items()) {
    if (!known_fields().count(name)) return unknown_parameter(name);
  }
  FieldReader f(body);
  GenerationRequest& g = out->g;
  json& s = out->settings;
  g.chat = true;
  g.options.sampling = d.sampling;
  g.options.max_tokens = d.max_tokens;
  g.options.reasoning_budget = d.reasoning_budget;
  refuse_unsupported(f, body);
  if (f.has("model")) f.string("model");  // one model is served: any name answers
  g.seed_given = read_sampling(f, &g.options);
  if (auto v = f.integer("max_output_tokens", 1, 1 << 24)) {
    g.options.max_tokens = d.max_tokens > 0
                               ? std::min<int32_t>(static_cast<int32_t>(*v), d.max_tokens)
                               : static_cast<int32_t>(*v);
  }
  if (auto v = f.boolean("stream")) g.stream = *v;
  if (f.has("stream_options") && !body["stream_options"].is_object())
    f.fail(ApiError::bad_request("'stream_options' must be an object", "stream_options"));
  if (auto v = f.boolean("store")) out->store = *v;
  if (auto v = f.boolean("cache")) g.cache = *v;
  if (auto v = f.boolean("ignore_eos")) g.options.stop_at_eog = !*v;
  if (auto v = f.string("user")) g.user = *v;
  if (auto v = f.string("safety_identifier"); v && g.user.empty()) g.user = *v;
  if (auto v = f.string("prompt_cache_key")) g.prompt_cache_key = *v;
  f.string("prompt_cache_retention");  // the prefix cache lives as long as its memory allows
  read_reasoning(f, body, d, &g, &s);
  if (auto v = f.integer("reasoning_budget", -1, 1 << 24)) {
    if (f.has("reasoning") && body["reasoning"].is_object() &&
        body["reasoning"].contains("effort") && !body["reasoning"]["effort"].is_null())
      f.fail(ApiError::bad_request("send only one of 'reasoning.effort' and 'reasoning_budget'",
                                   "reasoning_budget"));
    g.options.reasoning_budget = static_cast<int32_t>(*v);
  }
  read_metadata(f, body, &s);
  read_text(f, body, &g, &s);

  // The conversation: instructions, the previous response's items, this input.
  const auto instructions = f.string("instructions");
  if (instructions && !instructions->empty()) g.messages.push_back({"system", *instructions});
  std::unordered_set<std::string> call_ids;
  if (auto id = f.string("previous_response_id")) {
    out->previous_response_id = *id;
    const std::optional<json> earlier = lookup ? lookup(*id) : std::nullopt;
    if (!earlier) {
      ApiError e = ApiError::bad_request(
          fmt::format("Previous response with id '{}' not found.", *id), "previous_response_id");
      e.code = "previous_response_not_found";
      return e;
    }
    read_items(f, *earlier, "previous_response_id", &call_ids, &g.messages);
  }
  json input;
  if (!f.ok()) return f.error();
  if (auto e = resolve_input(body, find_item, !out->previous_response_id.empty(), &input)) return e;
  for (const auto& item : input) {
    if (str_or_empty(item, "type") != "reasoning") out->input_items.push_back(item);
  }
  read_items(f, input, "input", &call_ids, &g.messages);

  json tools_echo = json::array();
  std::vector<grammar::ToolFunction> tools;
  if (f.ok() && f.has("tools")) tools = read_tools(f, body["tools"], &tools_echo);
  s["tools"] = tools_echo;
  if (f.ok()) read_tool_choice(f, body, tools, &g, &s);
  if (!f.ok()) return f.error();

  s["instructions"] = instructions ? json(*instructions) : json(nullptr);
  s["max_output_tokens"] = f.has("max_output_tokens") ? json(g.options.max_tokens) : json(nullptr);
  s["temperature"] = as_written(g.options.sampling.temperature);
  s["top_p"] = as_written(g.options.sampling.top_p);
  s["previous_response_id"] =
      out->previous_response_id.empty() ? json(nullptr) : json(out->previous_response_id);
  s["store"] = out->store;
  s["truncation"] = "disabled";
  s["service_tier"] = "default";
  s["background"] = false;
  s["top_logprobs"] = 0;
  if (f.has("user")) s["user"] = g.user;
  if (f.has("prompt_cache_key")) s["prompt_cache_key"] = g.prompt_cache_key;
  if (f.has("safety_identifier")) s["safety_identifier"] = body["safety_identifier"];
  return std::nullopt;
}

}  // namespace ponder::server
