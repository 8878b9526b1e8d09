#include "server/ollama/ollama_protocol.h"

#include <fmt/core.h>

#include <algorithm>

#include "grammar/json_schema.h"
#include "server/common/field_reader.h"
#include "server/common/request_fields.h"
#include "server/openai/openai_protocol.h"
#include "server/openai/openai_tools.h"

namespace ponder::server {

using nlohmann::json;

namespace {

// The fields /api/chat and /api/generate share: stream (default true), think, options.
std::optional<std::string> read_common(const json& body, const ServingDefaults& d,
                                       GenerationRequest* g, bool* think) {
  FieldReader f(body);
  g->options.sampling = d.sampling;
  g->options.max_tokens = d.max_tokens;
  g->options.reasoning_budget = d.reasoning_budget;
  g->stream = f.boolean("stream").value_or(true);
  // think: true / false, or an effort ("low" | "medium" | "high", ollama-js's types); false
  // answers without a thinking phase.
  if (f.has("think")) {
    const json& t = body["think"];
    if (t.is_boolean()) {
      *think = t.get<bool>();
      g->thinking = *think;
    } else if (!t.is_string() || t == "none" || t == "minimal" ||
               !apply_reasoning_effort(t.get<std::string>(), d, g)) {
      return "'think' must be true, false, \"low\", \"medium\" or \"high\"";
    }
  }
  if (f.has("options")) {
    const json& o = body["options"];
    if (!o.is_object()) return "'options' must be an object";
    FieldReader of(o);
    g->seed_given = read_sampling(of, &g->options);
    if (auto v = of.integer("reasoning_budget", -1, 1 << 24))
      g->options.reasoning_budget = static_cast<int32_t>(*v);
    if (auto n = of.integer("num_predict", -2, 1 << 24); n && *n > 0) {
      g->options.max_tokens = d.max_tokens > 0
                                  ? std::min<int32_t>(static_cast<int32_t>(*n), d.max_tokens)
                                  : static_cast<int32_t>(*n);
    }
    if (!of.ok()) return of.error().message;
  }
  // Fields of Ollama's API that Ponder does not implement: refused by name, never ignored.
  for (const char* name : {"images", "suffix", "context", "template"}) {
    auto it = body.find(name);
    if (it != body.end() && !it->is_null() && !(it->is_array() && it->empty()) &&
        !(it->is_string() && it->get<std::string>().empty())) {
      return fmt::format("'{}' is not supported by Ponder", name);
    }
  }
  // format: "json" (any JSON object) or a JSON Schema; "" or null: free text.
  if (f.has("format") && !body["format"].is_null()) {
    const json& fmt = body["format"];
    if (fmt.is_string() && fmt.get<std::string>().empty()) {
    } else if (fmt == "json") {
      g->grammar = grammar::json_object_gbnf();
      g->grammar_field = "format";
    } else if (fmt.is_object()) {
      constrain_to_schema(f, fmt, "format", g);
    } else {
      return "'format' must be \"json\" or a JSON Schema object";
    }
  }
  if (!f.ok()) return f.error().message;
  return std::nullopt;
}

}  // namespace

std::optional<std::string> parse_ollama_request(const json& body, const ServingDefaults& defaults,
                                                bool chat_shape, GenerationRequest* g,
                                                bool* think) {
  if (!body.is_object()) return "the request body is not a JSON object";
  if (auto e = read_common(body, defaults, g, think)) return e;
  if (chat_shape) {
    g->chat = true;
    auto it = body.find("messages");
    if (it == body.end() || !it->is_array() || it->empty())
      return "'messages' must be a non-empty array";
    for (const auto& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          (m.contains("content") && !m["content"].is_string())) {
        return "each message needs a string 'role' and a string 'content'";
      }
      const std::string role = m["role"];
      if (role != "system" && role != "user" && role != "assistant" && role != "tool")
        return "unsupported role '" + role + "'";
      text::ChatMessage msg{role, m.value("content", "")};
      // Ollama's assistant calls: [{"function": {"name": ..., "arguments": {...}}}], read as
      // OpenAI's.
      FieldReader mf(m);
      if (!read_message_tool_calls(mf, m, fmt::format("messages[{}]", g->messages.size()), &msg))
        return mf.error().message;
      g->messages.push_back(std::move(msg));
    }
    if (auto t = body.find("tools");
        t != body.end() && !t->is_null() && !(t->is_array() && t->empty())) {
      FieldReader f(body);
      const std::vector<grammar::ToolFunction> tools = read_functions(f, *t);
      // Ollama lets the model decide (auto); Ponder also takes OpenAI's "required" and "none".
      const std::string choice = f.string("tool_choice").value_or("auto");
      if (choice != "auto" && choice != "required" && choice != "none")
        return "'tool_choice' must be auto, required or none";
      if (f.ok() && choice != "none") {
        constrain_to_tools(f, tools,
                           choice == "required" ? grammar::ToolChoiceMode::kRequired
                                                : grammar::ToolChoiceMode::kAuto,
                           "", true, g);
      }
      if (!f.ok()) return f.error().message;
    }
  } else {
    if (auto t = body.find("tools"); t != body.end() && !t->is_null())
      return "'tools' is for /api/chat";
    auto p = body.find("prompt");
    if (p == body.end() || !p->is_string()) return "'prompt' must be a string";
    auto raw = body.find("raw");
    if (raw != body.end() && !raw->is_boolean()) return "'raw' must be a boolean";
    if (raw != body.end() && raw->get<bool>()) {
      g->chat = false;
      g->prompt = *p;
    } else {
      g->chat = true;
      auto system = body.find("system");
      if (system != body.end() && !system->is_string()) return "'system' must be a string";
      if (system != body.end()) g->messages.push_back({"system", *system});
      g->messages.push_back({"user", *p});
    }
  }
  return std::nullopt;
}

}  // namespace ponder::server
