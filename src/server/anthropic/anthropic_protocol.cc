#include "server/anthropic/anthropic_protocol.h"

#include <fmt/core.h>

#include <algorithm>
#include <initializer_list>
#include <unordered_set>

#include "grammar/tool_calls.h"
#include "server/common/field_reader.h"
#include "server/common/request_fields.h"
#include "server/openai/openai_tools.h"

namespace ponder::server {

using nlohmann::json;

namespace {

using Names = std::initializer_list<const char*>;

// "where.name" in Anthropic's dotted paths ("messages.0.content.1.text"); "name" at the top.
std::string at(const std::string& where, const std::string& name) {
  return where.empty() ? name : where + "." + name;
}

bool is_one_of(const std::string& key, Names names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return key == n; });
}

// Fields Anthropic documents that Ponder does not implement fail by name first; then any other
// field outside `known` fails as Anthropic's own validation does.
bool check_fields(FieldReader& f, const json& obj, const std::string& where, Names known,
                  Names refused = {}) {
  for (const auto& [key, value] : obj.items()) {
    if (is_one_of(key, refused)) {
      f.fail(ApiError::unsupported(at(where, key), fmt::format("'{}'", at(where, key))));
      return false;
    }
  }
  for (const auto& [key, value] : obj.items()) {
    if (!is_one_of(key, known) && !is_one_of(key, refused)) {
      f.fail(ApiError::bad_request(
          fmt::format("{}: Extra inputs are not permitted", at(where, key)), at(where, key)));
      return false;
    }
  }
  return true;
}

// obj[name] when it is a string, else "" (json::value() throws on a value of another type).
std::string string_or_empty(const json& obj, const char* name) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : "";
}

bool bad(FieldReader& f, const std::string& field, const std::string& message) {
  f.fail(ApiError::bad_request(fmt::format("{}: {}", field, message), field));
  return false;
}

// cache_control {type: "ephemeral", ttl}: a hint to Anthropic's prompt cache. Ponder's prefix
// cache reuses every prompt prefix without being asked, so the hint is checked and needs nothing.
bool check_cache_control(FieldReader& f, const json& obj, const std::string& where) {
  auto it = obj.find("cache_control");
  if (it == obj.end() || it->is_null()) return true;
  const std::string field = at(where, "cache_control");
  if (!it->is_object() || string_or_empty(*it, "type") != "ephemeral")
    return bad(f, field, "must be {\"type\": \"ephemeral\"}");
  if (!check_fields(f, *it, field, {"type", "ttl"})) return false;
  const json ttl = it->contains("ttl") ? (*it)["ttl"] : json();
  if (!ttl.is_null() && ttl != "5m" && ttl != "1h")
    return bad(f, field + ".ttl", "must be \"5m\" or \"1h\"");
  return true;
}

// A content block's type; false (failed) when it is not an object with a string 'type'.
bool typed_block(FieldReader& f, const json& b, const std::string& where, std::string* type) {
  if (!b.is_object() || !b.contains("type") || !b["type"].is_string())
    return bad(f, where, "each content block must be an object with a string 'type'");
  *type = b["type"].get<std::string>();
  return true;
}

// A text block {type: "text", text, cache_control, citations}: its text.
std::optional<std::string> text_block(FieldReader& f, const json& b, const std::string& where) {
  if (!check_fields(f, b, where, {"type", "text", "cache_control", "citations"}) ||
      !check_cache_control(f, b, where))
    return std::nullopt;
  if (!b.contains("text") || !b["text"].is_string()) {
    bad(f, at(where, "text"), "must be a string");
    return std::nullopt;
  }
  if (auto c = b.find("citations"); c != b.end() && !c->is_null() && !c->empty()) {
    f.fail(ApiError::unsupported(at(where, "citations"), "citations"));
    return std::nullopt;
  }
  return b["text"].get<std::string>();
}

// Block types Anthropic defines that Ponder cannot take (no vision, no documents, no server tools).
bool refuse_block_type(FieldReader& f, const std::string& type, const std::string& where) {
  f.fail(
      ApiError::unsupported(at(where, "type"), fmt::format("a content block of type '{}'", type)));
  return false;
}

bool known_unsupported_block(const std::string& type) {
  return is_one_of(
      type, {"image", "document", "search_result", "server_tool_use", "web_search_tool_result",
             "web_fetch_tool_result", "code_execution_tool_result",
             "bash_code_execution_tool_result", "text_editor_code_execution_tool_result",
             "mcp_tool_use", "mcp_tool_result", "container_upload", "tool_reference"});
}

// system: a string or an array of text blocks.
void read_system(FieldReader& f, const json& body, GenerationRequest* out) {
  auto it = body.find("system");
  if (it == body.end() || it->is_null()) return;
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_array()) {
    for (size_t i = 0; i < it->size() && f.ok(); ++i) {
      const std::string where = fmt::format("system.{}", i);
      std::string type;
      if (!typed_block(f, (*it)[i], where, &type)) return;
      if (type != "text") {
        bad(f, at(where, "type"), fmt::format("is '{}'; system blocks must be text", type));
        return;
      }
      auto t = text_block(f, (*it)[i], where);
      if (!t) return;
      text += (text.empty() || t->empty() ? "" : "\n\n") + *t;
    }
  } else {
    bad(f, "system", "must be a string or an array of text blocks");
    return;
  }
  if (!text.empty()) out->messages.push_back(text::ChatMessage{"system", std::move(text)});
}

// tool_result content: a string or text blocks.
std::optional<std::string> tool_result_content(FieldReader& f, const json& b,
                                               const std::string& where) {
  auto it = b.find("content");
  if (it == b.end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array()) {
    bad(f, at(where, "content"), "must be a string or an array of text blocks");
    return std::nullopt;
  }
  std::string text;
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string w = fmt::format("{}.content.{}", where, i);
    std::string type;
    if (!typed_block(f, (*it)[i], w, &type)) return std::nullopt;
    if (type != "text") {
      if (known_unsupported_block(type))
        refuse_block_type(f, type, w);
      else
        bad(f, at(w, "type"), fmt::format("is '{}'; a tool result holds text blocks", type));
      return std::nullopt;
    }
    auto t = text_block(f, (*it)[i], w);
    if (!t) return std::nullopt;
    text += (text.empty() || t->empty() ? "" : "\n\n") + *t;
  }
  return text;
}

// One message into R1's roles: a user turn's tool_result blocks become "tool" messages (before
// its text, as Anthropic orders them), an assistant turn's tool_use blocks its tool calls, and
// thinking blocks are dropped (R1's template drops the thinking of earlier turns).
bool read_message(FieldReader& f, const json& m, size_t i, std::unordered_set<std::string>* ids,
                  GenerationRequest* out) {
  const std::string where = fmt::format("messages.{}", i);
  if (!m.is_object()) return bad(f, where, "must be an object with 'role' and 'content'");
  if (!check_fields(f, m, where, {"role", "content"})) return false;
  if (!m.contains("role") || !m["role"].is_string())
    return bad(f, at(where, "role"), "must be \"user\" or \"assistant\"");
  const std::string role = m["role"].get<std::string>();
  if (role != "user" && role != "assistant")
    return bad(f, at(where, "role"),
               fmt::format("is '{}'; it must be \"user\" or \"assistant\" (the system prompt is "
                           "the top-level 'system')",
                           role));
  if (i == 0 && role != "user") return bad(f, where, "the first message must use the user role");
  const bool user = role == "user";
  auto c = m.find("content");
  if (c == m.end() || c->is_null()) return bad(f, at(where, "content"), "Field required");
  text::ChatMessage msg{role, ""};
  std::vector<text::ChatMessage> results;  // user: tool results, before the text
  if (c->is_string()) {
    msg.content = c->get<std::string>();
    if (msg.content.empty()) return bad(f, at(where, "content"), "must not be empty");
  } else if (c->is_array()) {
    if (c->empty()) return bad(f, at(where, "content"), "must not be empty");
    for (size_t k = 0; k < c->size(); ++k) {
      const std::string w = fmt::format("{}.content.{}", where, k);
      const json& b = (*c)[k];
      std::string type;
      if (!typed_block(f, b, w, &type)) return false;
      if (type == "text") {
        auto t = text_block(f, b, w);
        if (!t) return false;
        msg.content += (msg.content.empty() || t->empty() ? "" : "\n\n") + *t;
      } else if (type == "thinking" || type == "redacted_thinking") {
        if (user) return bad(f, at(w, "type"), fmt::format("'{}' is for assistant turns", type));
        if (!check_fields(f, b, w, {"type", "thinking", "signature", "data"})) return false;
      } else if (type == "tool_use") {
        if (user) return bad(f, at(w, "type"), "'tool_use' is for assistant turns");
        if (!check_fields(f, b, w, {"type", "id", "name", "input", "cache_control"}) ||
            !check_cache_control(f, b, w))
          return false;
        if (!b.contains("id") || !b["id"].is_string() || b["id"].get<std::string>().empty())
          return bad(f, at(w, "id"), "must be a non-empty string");
        if (!b.contains("name") || !b["name"].is_string())
          return bad(f, at(w, "name"), "must be a string");
        if (!b.contains("input") || !b["input"].is_object())
          return bad(f, at(w, "input"), "must be an object");
        const std::string id = b["id"].get<std::string>();
        msg.tool_calls.push_back({b["name"].get<std::string>(), b["input"].dump(), id});
        ids->insert(id);
      } else if (type == "tool_result") {
        if (!user) return bad(f, at(w, "type"), "'tool_result' is for user turns");
        if (!check_fields(f, b, w,
                          {"type", "tool_use_id", "content", "is_error", "cache_control"}) ||
            !check_cache_control(f, b, w))
          return false;
        if (!b.contains("tool_use_id") || !b["tool_use_id"].is_string())
          return bad(f, at(w, "tool_use_id"), "must be a string");
        const std::string id = b["tool_use_id"].get<std::string>();
        if (!ids->count(id))
          return bad(f, at(w, "tool_use_id"),
                     fmt::format("'{}' matches no earlier tool_use block", id));
        auto is_error = b.find("is_error");
        if (is_error != b.end() && !is_error->is_null() && !is_error->is_boolean())
          return bad(f, at(w, "is_error"), "must be a boolean");
        auto content = tool_result_content(f, b, w);
        if (!content) return false;
        // R1's template has no error flag: the result says so in words.
        if (is_error != b.end() && is_error->is_boolean() && is_error->get<bool>())
          *content = "Error: " + *content;
        text::ChatMessage r{"tool", std::move(*content)};
        r.tool_call_id = id;
        results.push_back(std::move(r));
      } else if (known_unsupported_block(type)) {
        return refuse_block_type(f, type, w);
      } else {
        return bad(f, at(w, "type"),
                   fmt::format("'{}' is not a content block type (text, tool_use, tool_result, "
                               "thinking, redacted_thinking)",
                               type));
      }
    }
  } else {
    return bad(f, at(where, "content"), "must be a string or an array of content blocks");
  }
  for (text::ChatMessage& r : results) out->messages.push_back(std::move(r));
  if (!user || !msg.content.empty() || results.empty()) out->messages.push_back(std::move(msg));
  return true;
}

// tools [{name, description, input_schema}] in OpenAI's shape for read_functions.
void read_anthropic_tools(FieldReader& f, const json& body, GenerationRequest* out) {
  const json* tc = body.contains("tool_choice") && !body["tool_choice"].is_null()
                       ? &body["tool_choice"]
                       : nullptr;
  std::string choice = "auto", named;
  bool parallel = true;
  if (tc != nullptr) {
    if (!tc->is_object() || !tc->contains("type") || !(*tc)["type"].is_string()) {
      bad(f, "tool_choice", "must be an object with a 'type' (auto, any, tool or none)");
      return;
    }
    choice = (*tc)["type"].get<std::string>();
    if (!is_one_of(choice, {"auto", "any", "tool", "none"})) {
      bad(f, "tool_choice.type",
          fmt::format("is '{}'; it must be auto, any, tool or none", choice));
      return;
    }
    const std::string where = "tool_choice." + choice;
    if (choice == "none" && !check_fields(f, *tc, where, {"type"})) return;
    if (choice == "tool" &&
        !check_fields(f, *tc, where, {"type", "name", "disable_parallel_tool_use"}))
      return;
    if ((choice == "auto" || choice == "any") &&
        !check_fields(f, *tc, where, {"type", "disable_parallel_tool_use"}))
      return;
    if (choice == "tool") {
      if (!tc->contains("name") || !(*tc)["name"].is_string()) {
        bad(f, where + ".name", "Field required");
        return;
      }
      named = (*tc)["name"].get<std::string>();
    }
    if (auto d = tc->find("disable_parallel_tool_use"); d != tc->end() && !d->is_null()) {
      if (!d->is_boolean()) {
        bad(f, where + ".disable_parallel_tool_use", "must be a boolean");
        return;
      }
      parallel = !d->get<bool>();
    }
  }
  auto it = body.find("tools");
  if (it == body.end() || it->is_null() || (it->is_array() && it->empty())) {
    if (choice == "any" || choice == "tool")
      bad(f, "tool_choice", fmt::format("'{}' needs 'tools'", choice));
    return;
  }
  if (!it->is_array()) {
    bad(f, "tools", "must be an array of tools");
    return;
  }
  json functions = json::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const json& t = (*it)[i];
    const std::string w = fmt::format("tools.{}", i);
    if (!t.is_object()) {
      bad(f, w, "must be an object with 'name' and 'input_schema'");
      return;
    }
    if (auto type = t.find("type"); type != t.end() && !type->is_null() && *type != "custom") {
      f.fail(ApiError::unsupported(
          at(w, "type"), fmt::format("a tool of type '{}' (only custom tools, with an "
                                     "input_schema)",
                                     type->is_string() ? type->get<std::string>() : type->dump())));
      return;
    }
    if (!check_fields(f, t, w, {"type", "name", "description", "input_schema", "cache_control"},
                      {"strict", "input_examples", "defer_loading", "allowed_callers",
                       "eager_input_streaming"}) ||
        !check_cache_control(f, t, w))
      return;
    if (!t.contains("name") || !t["name"].is_string() || t["name"].get<std::string>().empty() ||
        t["name"].get<std::string>().size() > 128) {
      bad(f, at(w, "name"), "must be a string of 1 to 128 characters");
      return;
    }
    const std::string name = t["name"].get<std::string>();
    if (!std::all_of(name.begin(), name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-';
        })) {
      bad(f, at(w, "name"), fmt::format("'{}' must match ^[a-zA-Z0-9_-]{{1,128}}$", name));
      return;
    }
    if (auto d = t.find("description"); d != t.end() && !d->is_null() && !d->is_string()) {
      bad(f, at(w, "description"), "must be a string");
      return;
    }
    if (!t.contains("input_schema") || !t["input_schema"].is_object()) {
      bad(f, at(w, "input_schema"), "must be a JSON Schema object");
      return;
    }
    json fn = {{"name", name}, {"parameters", t["input_schema"]}};
    if (t.contains("description") && t["description"].is_string())
      fn["description"] = t["description"];
    functions.push_back({{"type", "function"}, {"function", fn}});
  }
  if (choice == "none") return;  // the model answers in text, as without tools
  std::vector<grammar::ToolFunction> tools = read_functions(f, functions);
  if (!f.ok()) return;
  grammar::ToolChoiceMode mode = grammar::ToolChoiceMode::kAuto;
  if (choice == "any") mode = grammar::ToolChoiceMode::kRequired;
  if (choice == "tool") {
    mode = grammar::ToolChoiceMode::kNamed;
    if (std::none_of(tools.begin(), tools.end(),
                     [&](const grammar::ToolFunction& t) { return t.name == named; })) {
      bad(f, "tool_choice.tool.name", fmt::format("'{}' is not among 'tools'", named));
      return;
    }
  }
  constrain_to_tools(f, tools, mode, named, parallel, out);
}

// thinking: enabled (a budget), disabled (no thinking phase) or adaptive (R1's own).
void read_thinking(FieldReader& f, const json& body, std::optional<int64_t> max_tokens,
                   GenerationRequest* out) {
  auto it = body.find("thinking");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string()) {
    bad(f, "thinking", "must be an object with a 'type' (enabled, disabled or adaptive)");
    return;
  }
  const std::string type = (*it)["type"].get<std::string>();
  const std::string where = "thinking." + type;
  if (type == "disabled") {
    if (check_fields(f, *it, where, {"type"})) out->thinking = false;
  } else if (type == "enabled" || type == "adaptive") {
    if (!check_fields(f, *it, where,
                      type == "enabled" ? Names{"type", "budget_tokens", "display"}
                                        : Names{"type", "display"}))
      return;
    if (auto d = it->find("display"); d != it->end() && !d->is_null() && *d != "summarized") {
      // "omitted" hides the thinking text; R1's thinking is always returned in full.
      f.fail(ApiError::unsupported(where + ".display", "a display other than \"summarized\""));
      return;
    }
    if (type == "adaptive") return;  // R1 decides how long it thinks
    FieldReader t(*it);
    auto budget = t.integer("budget_tokens", kMinThinkingBudget, 1 << 24);
    if (!t.ok()) {
      ApiError e = t.error();
      e.message = where + "." + e.message;
      f.fail(e);
      return;
    }
    if (!budget) {
      bad(f, where + ".budget_tokens", "Field required");
      return;
    }
    if (max_tokens && *budget >= *max_tokens) {
      bad(f, "max_tokens",
          fmt::format("`max_tokens` must be greater than `thinking.budget_tokens` ({} >= {})",
                      *budget, *max_tokens));
      return;
    }
    out->options.reasoning_budget = static_cast<int32_t>(*budget);
  } else if (type == "between_tools") {
    f.fail(ApiError::unsupported("thinking.type", "thinking of type 'between_tools'"));
  } else {
    bad(f, "thinking.type", fmt::format("is '{}'; it must be enabled, disabled or adaptive", type));
  }
}

// output_config: effort (a thinking budget) and format (a JSON Schema for the answer).
void read_output_config(FieldReader& f, const json& body, const ServingDefaults& defaults,
                        GenerationRequest* out) {
  auto it = body.find("output_config");
  if (it == body.end() || it->is_null()) return;
  if (!it->is_object()) {
    bad(f, "output_config", "must be an object");
    return;
  }
  if (!check_fields(f, *it, "output_config", {"effort", "format"})) return;
  if (auto e = it->find("effort"); e != it->end() && !e->is_null()) {
    std::string effort = e->is_string() ? e->get<std::string>() : "";
    if (effort == "xhigh" || effort == "max") effort = "high";
    if (effort == "none" || effort == "minimal" || !apply_reasoning_effort(effort, defaults, out)) {
      bad(f, "output_config.effort", "must be low, medium, high, xhigh or max");
      return;
    }
  }
  if (auto fm = it->find("format"); fm != it->end() && !fm->is_null()) {
    if (!fm->is_object() || string_or_empty(*fm, "type") != "json_schema" ||
        !fm->contains("schema") || !(*fm)["schema"].is_object()) {
      bad(f, "output_config.format", "must be {\"type\": \"json_schema\", \"schema\": {...}}");
      return;
    }
    if (!check_fields(f, *fm, "output_config.format", {"type", "schema"})) return;
    constrain_to_schema(f, (*fm)["schema"], "output_config.format", out);
  }
}

}  // namespace

FieldPolicy anthropic_field_policy(bool count_tokens) {
  FieldPolicy p;
  p.honoured = {"model", "messages",    "system",        "thinking",
                "tools", "tool_choice", "cache_control", "output_config"};
  if (!count_tokens) {
    for (std::string_view n :
         {"max_tokens", "stop_sequences", "temperature", "top_p", "top_k", "stream", "metadata"})
      p.honoured.push_back(n);
  }
  p.fixed = {{"service_tier", "standard_only", "one tier of service, no priority capacity"},
             {"speed", "standard", "one speed: the machine's"}};
  p.refused = {{"container", "no code execution containers"},
               {"mcp_servers", "no MCP connector: call the MCP tools from the client as tools"},
               {"inference_geo", "the model runs on this server"},
               {"diagnostics", ""},
               {"context_management", "no context editing: trim the messages in the client"},
               {"user_profile_id", "send metadata.user_id"},
               {"workspace_id", "no workspaces"}};
  return p;
}

std::optional<ApiError> parse_messages_request(const json& body, const ServingDefaults& defaults,
                                               bool count_tokens, GenerationRequest* out) {
  if (!body.is_object()) return ApiError::bad_request("the request body must be a JSON object");
  FieldReader f(body);
  out->chat = true;
  out->split_reasoning = true;
  out->options.sampling = defaults.sampling;
  out->options.max_tokens = defaults.max_tokens;
  out->options.reasoning_budget = defaults.reasoning_budget;
  // Anthropic refuses a field it does not know, and its clients expect that: so does this route
  // (the OpenAI and Ollama routes ignore and name them instead, field_policy.h).
  const FieldPolicy policy = anthropic_field_policy(count_tokens);
  policy.check(f, body);
  if (const std::vector<std::string> unknown = policy.unknown(body); f.ok() && !unknown.empty())
    bad(f, unknown[0], "Extra inputs are not permitted");
  if (!f.ok()) return f.error();
  if (!f.has("model")) return ApiError::bad_request("model: Field required", "model");
  f.string("model");  // any name: the server serves one model and answers with its name
  std::optional<int64_t> max_tokens;
  if (!count_tokens) {
    max_tokens = f.integer("max_tokens", 1, 1 << 24);
    if (f.ok() && !max_tokens)
      return ApiError::bad_request("max_tokens: Field required", "max_tokens");
    if (max_tokens) {
      out->options.max_tokens =
          defaults.max_tokens > 0
              ? std::min<int32_t>(static_cast<int32_t>(*max_tokens), defaults.max_tokens)
              : static_cast<int32_t>(*max_tokens);
    }
    f.number("temperature", 0, 1);  // Anthropic's range; read_sampling takes it
    if (f.ok()) read_sampling(f, &out->options);
    if (f.has("stop_sequences") && !body["stop_sequences"].is_array())
      bad(f, "stop_sequences", "must be an array of strings");
    if (auto v = f.strings("stop_sequences", 16)) {
      for (const std::string& s : *v) {
        if (s.empty()) bad(f, "stop_sequences", "holds an empty string");
      }
      out->options.stop = *v;
    }
    if (auto v = f.boolean("stream")) out->stream = *v;
    if (f.has("metadata")) {
      const json& md = body["metadata"];
      if (!md.is_object()) {
        bad(f, "metadata", "must be an object");
      } else if (check_fields(f, md, "metadata", {"user_id"})) {
        FieldReader m(md);
        if (auto u = m.string("user_id")) out->user = *u;
        if (!m.ok()) bad(f, "metadata.user_id", "must be a string");
      }
    }
  }
  check_cache_control(f, body, "");
  if (!f.ok()) return f.error();
  read_system(f, body, out);
  auto it = body.find("messages");
  if (it == body.end() || it->is_null()) {
    f.fail(ApiError::bad_request("messages: Field required", "messages"));
  } else if (!it->is_array()) {
    bad(f, "messages", "must be an array of messages");
  } else if (it->empty()) {
    bad(f, "messages", "at least one message is required");
  } else {
    std::unordered_set<std::string> tool_use_ids;
    for (size_t i = 0; i < it->size() && f.ok(); ++i)
      read_message(f, (*it)[i], i, &tool_use_ids, out);
    if (f.ok() && string_or_empty(it->back(), "role") == "assistant") {
      f.fail(ApiError::unsupported(fmt::format("messages.{}", it->size() - 1),
                                   "a final assistant message (prefill)"));
    }
  }
  if (f.ok()) read_thinking(f, body, max_tokens, out);
  if (f.ok()) read_output_config(f, body, defaults, out);
  if (f.ok()) read_anthropic_tools(f, body, out);
  if (!f.ok()) return f.error();
  return std::nullopt;
}

std::string anthropic_error_type(int status) {
  switch (status) {
    case 400:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status < 500 ? "invalid_request_error" : "api_error";
  }
}

json anthropic_error_json(const ApiError& e) {
  return {{"type", "error"},
          {"error", {{"type", anthropic_error_type(e.status)}, {"message", e.message}}}};
}

std::string anthropic_stop_reason(const std::string& engine_reason, bool called_tools,
                                  bool hit_stop_sequence) {
  if (engine_reason == "length") return "max_tokens";
  if (engine_reason == "context") return "model_context_window_exceeded";
  if (called_tools) return "tool_use";
  if (hit_stop_sequence) return "stop_sequence";
  return "end_turn";
}

}  // namespace ponder::server
