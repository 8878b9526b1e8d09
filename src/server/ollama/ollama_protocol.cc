#include "server/ollama/ollama_protocol.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "grammar/json_schema.h"
#include "server/common/field_policy.h"
#include "server/common/field_reader.h"
#include "server/common/request_fields.h"
#include "server/openai/openai_protocol.h"
#include "server/openai/openai_tools.h"

namespace ponder::server {

using nlohmann::json;

namespace {}  // namespace

// The top-level fields of /api/chat and /api/generate (images, suffix, context and template are
// refused in read_common, which allows their empty values).
const FieldPolicy& ollama_field_policy(bool chat) {
  static const FieldPolicy chat_policy{{"model", "messages", "tools", "tool_choice", "format",
                                        "options", "stream", "keep_alive", "think"},
                                       {},
                                       {}};
  static const FieldPolicy generate_policy{
      {"model", "prompt", "suffix", "images", "format", "options", "system", "template", "context",
       "stream", "raw", "keep_alive", "think"},
      {},
      {}};
  return chat ? chat_policy : generate_policy;
}

// Ollama's options: the sampling ones, and the runner's, which Ponder takes where they say what
// it does anyway (no GPU, the weights mapped).
const FieldPolicy& ollama_options_policy() {
  static const FieldPolicy p{
      {"seed", "num_predict", "top_k", "top_p", "min_p", "repeat_last_n", "temperature",
       "repeat_penalty", "presence_penalty", "frequency_penalty", "stop", "num_keep", "num_ctx",
       "reasoning_budget"},
      {{"typical_p", 1, "typical sampling is not implemented"},
       {"tfs_z", 1, "tail-free sampling is not implemented"},
       {"mirostat", 0, "mirostat sampling is not implemented"},
       {"penalize_newline", true, "a newline is penalized like any other token"},
       {"num_gpu", 0, "Ponder runs on the CPU"},
       {"main_gpu", 0, "Ponder runs on the CPU"},
       {"low_vram", false, "Ponder runs on the CPU"},
       {"use_mmap", true, "the weights are always mapped"},
       {"use_mlock", false, "the weights are not locked in memory"},
       {"vocab_only", false, "the whole model is loaded"},
       {"logits_all", false, "logits are kept for sampled rows only"},
       {"f16_kv", true, "the K/V cache type is ponder serve's --cache-type-k / -v"},
       {"numa", false, "NUMA placement is ponder serve's"}},
      {{"num_thread", "threads are set by ponder serve --threads"},
       {"num_batch", "the prompt chunk is sized by time (docs/serving.md)"},
       {"mirostat_tau", "mirostat sampling is not implemented"},
       {"mirostat_eta", "mirostat sampling is not implemented"}}};
  return p;
}

namespace {

// The fields /api/chat and /api/generate share: stream (default true), think, keep_alive,
// options, format.
std::optional<std::string> read_common(const json& body, const ServingDefaults& d, bool chat,
                                       GenerationRequest* g, OllamaRequest* x) {
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
      x->show_thinking = t.get<bool>();
      g->thinking = x->show_thinking;
    } else if (t == "low" || t == "medium" || t == "high") {
      apply_reasoning_effort(t.get<std::string>(), d, g);
    } else {
      return "'think' must be true, false, \"low\", \"medium\" or \"high\"";
    }
  }
  if (f.has("keep_alive")) {
    x->keep_alive_s = parse_keep_alive(body["keep_alive"]);
    if (!x->keep_alive_s)
      return "'keep_alive' must be a number of seconds or a duration such as \"5m\"";
  }
  g->ignored_fields = ollama_field_policy(chat).unknown(body);
  if (f.has("options")) {
    const json& o = body["options"];
    if (!o.is_object()) return "'options' must be an object";
    FieldReader of(o);
    ollama_options_policy().check(of, o, "options.");
    for (std::string& n : ollama_options_policy().unknown(o, "options."))
      g->ignored_fields.push_back(std::move(n));
    g->seed_given = read_sampling(of, &g->options);
    if (auto v = of.integer("reasoning_budget", -1, 1 << 24))
      g->options.reasoning_budget = static_cast<int32_t>(*v);
    if (auto n = of.integer("num_predict", -2, 1 << 24); n && *n > 0) {
      g->options.max_tokens = d.max_tokens > 0
                                  ? std::min<int32_t>(static_cast<int32_t>(*n), d.max_tokens)
                                  : static_cast<int32_t>(*n);
    }
    if (auto v = of.integer("num_keep", -1, 1 << 24)) g->options.n_keep = static_cast<int32_t>(*v);
    if (auto v = of.integer("num_ctx", 1, 1 << 24)) {
      g->context_limit = static_cast<int32_t>(*v);
      g->context_limit_field = "options.num_ctx";
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
                                                OllamaRequest* x) {
  if (!body.is_object()) return "the request body is not a JSON object";
  if (auto e = read_common(body, defaults, chat_shape, g, x)) return e;
  if (chat_shape) {
    g->chat = true;
    auto it = body.find("messages");
    if (it == body.end() || it->is_null() || (it->is_array() && it->empty())) {
      x->load_only = true;  // Ollama's load / unload idiom
      return std::nullopt;
    }
    if (!it->is_array()) return "'messages' must be an array";
    for (const auto& m : *it) {
      if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
          (m.contains("content") && !m["content"].is_string())) {
        return "'messages': each message needs a string 'role' and a string 'content'";
      }
      const std::string role = m["role"];
      if (role != "system" && role != "user" && role != "assistant" && role != "tool")
        return "unsupported role '" + role + "'";
      if (auto im = m.find("images"); im != m.end() && !im->is_null() && !im->empty())
        return "'images' in messages is not supported by Ponder (it reads text only)";
      text::ChatMessage msg{role, m.value("content", "")};
      // Ollama's assistant calls: [{"function": {"name": ..., "arguments": {...}}}], read as
      // OpenAI's.
      FieldReader mf(m);
      if (!read_message_tool_calls(mf, m, fmt::format("messages[{}]", g->messages.size()), &msg))
        return mf.error().message;
      g->messages.push_back(std::move(msg));
    }
    if (auto c = body.find("tool_choice"); c != body.end() && !c->is_null() && !c->is_string())
      return "'tool_choice' must be auto, required or none";
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
    if (p == body.end() || p->is_null() || (p->is_string() && p->get<std::string>().empty())) {
      x->load_only = true;  // Ollama's load / unload idiom
      return std::nullopt;
    }
    if (!p->is_string()) return "'prompt' must be a string";
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

std::optional<double> parse_keep_alive(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  const std::string s = v.get<std::string>();
  if (s.empty()) return std::nullopt;
  size_t i = 0;
  double sign = 1;
  if (s[0] == '-' || s[0] == '+') {
    sign = s[0] == '-' ? -1 : 1;
    i = 1;
  }
  double total = 0;
  bool any = false;
  while (i < s.size()) {
    size_t used = 0;
    double n = 0;
    try {
      n = std::stod(s.substr(i), &used);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used == 0 || !std::isfinite(n) || s[i] == '-' || s[i] == '+') return std::nullopt;
    i += used;
    size_t u = i;
    while (u < s.size() && !std::isdigit(static_cast<unsigned char>(s[u])) && s[u] != '.') ++u;
    const std::string unit = s.substr(i, u - i);
    double scale = 0;
    if (unit.empty()) {
      if (i != s.size() || any) return std::nullopt;  // a bare number: seconds
      scale = 1;
    } else if (unit == "h") {
      scale = 3600;
    } else if (unit == "m") {
      scale = 60;
    } else if (unit == "s") {
      scale = 1;
    } else if (unit == "ms") {
      scale = 1e-3;
    } else if (unit == "us" || unit == "\u00b5s") {
      scale = 1e-6;
    } else if (unit == "ns") {
      scale = 1e-9;
    } else {
      return std::nullopt;
    }
    total += n * scale;
    any = true;
    i = u;
  }
  return sign * total;
}

}  // namespace ponder::server
