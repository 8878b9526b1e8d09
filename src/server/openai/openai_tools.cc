#include "server/openai/openai_tools.h"

#include <fmt/core.h>

#include <unordered_set>

#include "grammar/tool_calls.h"

namespace ponder::server {

using nlohmann::json;

bool read_message_tool_calls(FieldReader& f, const json& m, const std::string& where,
                             text::ChatMessage* out) {
  auto it = m.find("tool_calls");
  if (it == m.end() || it->is_null()) return true;
  const std::string field = where + ".tool_calls";
  if (out->role != "assistant") {
    f.fail(ApiError::bad_request(fmt::format("'{}' is only for assistant messages", field), field));
    return false;
  }
  if (!it->is_array()) {
    f.fail(ApiError::bad_request(fmt::format("'{}' must be an array", field), field));
    return false;
  }
  for (size_t k = 0; k < it->size(); ++k) {
    const json& c = (*it)[k];
    const std::string at = fmt::format("{}[{}]", field, k);
    const json* fn = c.is_object() && c.contains("function") ? &c["function"] : nullptr;
    if (fn == nullptr || !fn->is_object() || !fn->contains("name") || !(*fn)["name"].is_string()) {
      f.fail(ApiError::bad_request(fmt::format("'{}' needs a 'function' with a string 'name'", at),
                                   at + ".function.name"));
      return false;
    }
    text::ChatToolCall call;
    call.name = (*fn)["name"].get<std::string>();
    auto args = fn->find("arguments");
    if (args != fn->end() && args->is_string()) {
      call.arguments = args->get<std::string>();
    } else if (args != fn->end() && args->is_object()) {
      call.arguments = args->dump();
    } else if (args == fn->end() || args->is_null()) {
      call.arguments = "{}";
    } else {
      f.fail(ApiError::bad_request(fmt::format("'{}.function.arguments' must be a JSON string", at),
                                   at + ".function.arguments"));
      return false;
    }
    if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
    out->tool_calls.push_back(std::move(call));
  }
  return true;
}

std::vector<grammar::ToolFunction> read_functions(FieldReader& f, const json& tools) {
  std::vector<grammar::ToolFunction> out;
  if (!tools.is_array()) {
    f.fail(ApiError::bad_request("'tools' must be an array of tools", "tools"));
    return out;
  }
  std::unordered_set<std::string> names;
  for (size_t i = 0; i < tools.size(); ++i) {
    const json& t = tools[i];
    const std::string at = fmt::format("tools[{}]", i);
    // Not json::value(): it throws on a type that is not a string (a 500 instead of this 400).
    if (!t.is_object() || !t.contains("type") || t["type"] != "function") {
      f.fail(
          ApiError::bad_request(fmt::format("'{}.type' must be \"function\"", at), at + ".type"));
      break;
    }
    const json* fn = t.contains("function") ? &t["function"] : nullptr;
    if (fn == nullptr || !fn->is_object()) {
      f.fail(ApiError::bad_request(fmt::format("'{}.function' must be an object", at),
                                   at + ".function"));
      break;
    }
    grammar::ToolFunction tf;
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty()) {
      f.fail(ApiError::bad_request(fmt::format("'{}.function.name' must be a non-empty string", at),
                                   at + ".function.name"));
      break;
    }
    tf.name = name->get<std::string>();
    if (!names.insert(tf.name).second) {
      f.fail(ApiError::bad_request(
          fmt::format("'{}.function.name': '{}' names two tools", at, tf.name),
          at + ".function.name"));
      break;
    }
    if (auto d = fn->find("description"); d != fn->end() && d->is_string())
      tf.description = d->get<std::string>();
    if (auto p = fn->find("parameters"); p != fn->end() && !p->is_null()) {
      if (!p->is_object()) {
        f.fail(ApiError::bad_request(
            fmt::format("'{}.function.parameters' must be a JSON Schema object", at),
            at + ".function.parameters"));
        break;
      }
      if (!p->empty()) tf.parameters = *p;
    }
    out.push_back(std::move(tf));
  }
  return out;
}

bool require_named_tool(FieldReader& f, const std::vector<grammar::ToolFunction>& tools,
                        const std::string& named) {
  for (const auto& t : tools)
    if (t.name == named) return true;
  f.fail(ApiError::bad_request(
      fmt::format("'tool_choice' names the function '{}', which is not in 'tools'", named),
      "tool_choice"));
  return false;
}

void read_tools(FieldReader& f, const json& body, GenerationRequest* out) {
  // Every tool result answers a call made before it.
  std::unordered_set<std::string> call_ids;
  for (size_t i = 0; i < out->messages.size(); ++i) {
    const text::ChatMessage& m = out->messages[i];
    for (const text::ChatToolCall& c : m.tool_calls) call_ids.insert(c.id);
    if (m.role == "tool" && !call_ids.count(m.tool_call_id)) {
      const std::string field = fmt::format("messages[{}].tool_call_id", i);
      return f.fail(ApiError::bad_request(
          fmt::format("'{}' is '{}', which no earlier assistant tool call has", field,
                      m.tool_call_id),
          field));
    }
  }
  for (const char* name : {"functions", "function_call"}) {
    if (f.has(name))
      return f.fail(
          ApiError::unsupported(name, fmt::format("the deprecated '{}' (send 'tools')", name)));
  }
  const bool parallel = f.boolean("parallel_tool_calls").value_or(true);
  if (!f.has("tools")) {
    if (f.has("tool_choice"))
      f.fail(ApiError::bad_request("'tool_choice' needs 'tools'", "tool_choice"));
    return;
  }
  std::vector<grammar::ToolFunction> tools = read_functions(f, body["tools"]);
  if (!f.ok() || tools.empty()) return;
  grammar::ToolChoiceMode mode = grammar::ToolChoiceMode::kAuto;
  std::string named;
  if (f.has("tool_choice")) {
    const json& tc = body["tool_choice"];
    if (tc == "none") return;  // the model answers in text, as without tools
    if (tc == "required") {
      mode = grammar::ToolChoiceMode::kRequired;
    } else if (tc.is_object() && tc.contains("type") && tc["type"] == "function" &&
               tc.contains("function") && tc["function"].is_object() &&
               tc["function"].contains("name") && tc["function"]["name"].is_string()) {
      mode = grammar::ToolChoiceMode::kNamed;
      named = tc["function"]["name"].get<std::string>();
      if (!require_named_tool(f, tools, named)) return;
    } else if (tc != "auto") {
      return f.fail(
          ApiError::bad_request("'tool_choice' must be \"none\", \"auto\", \"required\" or "
                                "{\"type\": \"function\", \"function\": {\"name\": ...}}",
                                "tool_choice"));
    }
  }
  constrain_to_tools(f, tools, mode, named, parallel, out);
}

void constrain_to_tools(FieldReader& f, const std::vector<grammar::ToolFunction>& tools,
                        grammar::ToolChoiceMode mode, const std::string& named, bool parallel,
                        GenerationRequest* out) {
  if (!out->grammar.empty()) {
    return f.fail(ApiError::bad_request(
        "'tools' cannot be combined with 'response_format', 'grammar', 'json_schema' or 'format'",
        "tools"));
  }
  auto gbnf = grammar::tool_call_grammar(tools, mode, named, parallel);
  if (!gbnf.has_value())
    return f.fail(ApiError::bad_request("'tools': " + gbnf.status().message(), "tools"));
  out->grammar = std::move(*gbnf);
  out->grammar_field = "tools";
  out->tool_calls = true;
  // The function list joins the (last) system prompt, which R1's template keeps.
  const std::string prompt = grammar::render_tool_prompt(tools);
  text::ChatMessage* system = nullptr;
  for (text::ChatMessage& m : out->messages) {
    if (m.role == "system") system = &m;
  }
  if (system == nullptr) {
    out->messages.insert(out->messages.begin(), text::ChatMessage{"system", prompt});
  } else {
    system->content += system->content.empty() ? prompt : "\n\n" + prompt;
  }
}

std::string tool_call_id(const std::string& completion_id, int32_t choice, int32_t index) {
  const std::string base =
      completion_id.rfind("chatcmpl-", 0) == 0 ? completion_id.substr(9) : completion_id;
  return fmt::format("call_{}_{}_{}", base, choice, index);
}

}  // namespace ponder::server
