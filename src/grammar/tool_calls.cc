#include "grammar/tool_calls.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <utility>

#include "grammar/json_schema.h"

namespace ponder::grammar {

namespace {

using nlohmann::json;

constexpr std::string_view kFence = "```";
constexpr std::string_view kArgumentsEnd = "\n```";  // can only be JSON whitespace, then a fence

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Compact JSON that never throws: invalid UTF-8 in a string becomes U+FFFD.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

const json& parameters_of(const ToolFunction& f) {
  static const json kObject = json::object({{"type", "object"}});
  const json& p = f.parameters;
  return p.is_null() || (p.is_object() && p.empty()) ? kObject : p;
}

Status check_name(const std::vector<ToolFunction>& tools, size_t i) {
  const std::string& name = tools[i].name;
  if (name.empty()) return Status::errorf("tools[{}]: the function has no name", i);
  for (unsigned char c : name) {
    if (c <= 0x20 || c == 0x7F) {
      return Status::errorf(
          "tools[{}]: function name \"{}\" has whitespace or a control character (byte 0x{:02X})",
          i, name, c);
    }
  }
  for (size_t j = 0; j < i; ++j) {
    if (tools[j].name == name) {
      return Status::errorf("tools[{}]: function name \"{}\" is also tools[{}]'s", i, name, j);
    }
  }
  return Status::ok();
}

// A GBNF literal: the bytes between quotes, with '"', '\' and newlines escaped (the markers are
// UTF-8, written as they are; names hold no control bytes).
std::string literal(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  out += '"';
  return out;
}

// The length of the longest suffix of `s` that is a proper prefix of one of `markers`: what must
// be held back because the next bytes may complete a marker.
size_t partial_marker(std::string_view s, std::initializer_list<std::string_view> markers) {
  size_t best = 0;
  for (std::string_view m : markers) {
    for (size_t n = std::min(s.size(), m.size() - 1); n > best; --n) {
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        best = n;
        break;
      }
    }
  }
  return best;
}

// The first of `markers` in `s`: its position and which one (npos when none).
std::pair<size_t, size_t> find_first(std::string_view s,
                                     std::initializer_list<std::string_view> markers) {
  size_t pos = std::string_view::npos, which = 0, i = 0;
  for (std::string_view m : markers) {
    const size_t p = s.find(m);
    if (p < pos) {
      pos = p;
      which = i;
    }
    ++i;
  }
  return {pos, which};
}

bool is_lang_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '+';
}

}  // namespace

std::string render_tool_prompt(const std::vector<ToolFunction>& tools) {
  if (tools.empty()) return "";
  std::string s =
      "# Tools\n\n"
      "You can call functions to help you answer. Each line below is one function: its name, "
      "what it does and the JSON Schema of its arguments.\n\n";
  for (const ToolFunction& f : tools) {
    // Written field by field (not as a json object, which would sort "name" after
    // "description"); the schema's own keys come out sorted, so equal tools give equal bytes.
    s += "{\"name\":" + dump(json(f.name));
    if (!f.description.empty()) s += ",\"description\":" + dump(json(f.description));
    s += ",\"parameters\":" + dump(parameters_of(f)) + "}\n";
  }
  s += "\nTo call a function, think first, then write your answer as exactly this text and nothing "
       "else, where NAME is the function's name and ARGUMENTS is one JSON object that follows its "
       "schema:\n\n";
  s += std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
       std::string(kToolSep) + "NAME\n```json\nARGUMENTS\n```" + std::string(kToolCallEnd) +
       std::string(kToolCallsEnd) + "\n\n";
  s += "To call several functions at once, write each call from " + std::string(kToolCallBegin) +
       " to " + std::string(kToolCallEnd) + ", separated by a newline, all between one " +
       std::string(kToolCallsBegin) + " and one " + std::string(kToolCallsEnd) +
       ". The results come back in the next message. When no function is needed, answer in plain "
       "text instead.";
  return s;
}

Expected<std::string> tool_call_grammar(const std::vector<ToolFunction>& tools, ToolChoiceMode mode,
                                        std::string_view named, bool parallel) {
  if (tools.empty()) return Status::error("tool calls: no tools to call (tools is empty)");
  for (size_t i = 0; i < tools.size(); ++i) PONDER_RETURN_IF_ERROR(check_name(tools, i));

  std::vector<size_t> callable;  // indices into tools
  if (mode == ToolChoiceMode::kNamed) {
    for (size_t i = 0; i < tools.size(); ++i) {
      if (tools[i].name == named) callable.push_back(i);
    }
    if (callable.empty()) {
      std::string names;
      for (const ToolFunction& f : tools) names += (names.empty() ? "" : ", ") + f.name;
      return Status::errorf("tool_choice names function \"{}\", which is not among the tools ({})",
                            named, names);
    }
  } else {
    for (size_t i = 0; i < tools.size(); ++i) callable.push_back(i);
  }

  // One rule per callable tool, the whole call with its name and fences:
  //   tool-I ::= "<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n" tool-I-args
  //              "\n```<｜tool▁call▁end｜>"
  const std::string head = std::string(kToolCallBegin) + "function" + std::string(kToolSep);
  const std::string tail = "\n```" + std::string(kToolCallEnd);
  std::string g =
      mode == ToolChoiceMode::kAuto ? "root ::= tool-calls | tool-text\n" : "root ::= tool-calls\n";
  g += "tool-calls ::= " + literal(kToolCallsBegin) + " tool-call " +
       (parallel ? "( \"\\n\" tool-call )* " : "") + literal(kToolCallsEnd) + "\n";
  g += "tool-call ::=";
  for (size_t k = 0; k < callable.size(); ++k) {
    g += (k == 0 ? " tool-" : " | tool-") + std::to_string(callable[k]);
  }
  g += "\n";
  if (mode == ToolChoiceMode::kAuto) {
    // Plain text never starts like the calls marker: after optional whitespace, a first character
    // other than '<', or '<' followed by anything but '｜' (or nothing).
    g += "tool-text ::= [ \\t\\r\\n]* tool-text-head .* | [ \\t\\r\\n]* \"<\"\n";
    g += "tool-text-head ::= [^< \\t\\r\\n] | \"<\" [^｜]\n";
  }
  for (size_t i : callable) {
    const std::string rule = "tool-" + std::to_string(i);
    g += rule + " ::= " + literal(head + tools[i].name + "\n```json\n") + " " + rule + "-args " +
         literal(tail) + "\n";
    auto args = json_schema_rules(parameters_of(tools[i]), rule + "-args");
    if (!args.has_value()) {
      return args.status().with_context(
          fmt::format("tools[{}] (\"{}\"): parameters", i, tools[i].name));
    }
    g += *args;
    if (g.back() != '\n') g += '\n';
  }
  return g;
}

ParsedAnswer parse_tool_calls(std::string_view answer) {
  ToolCallStream stream;
  std::vector<ToolCallEvent> events = stream.push(answer);
  for (ToolCallEvent& e : stream.finish()) events.push_back(std::move(e));
  ParsedAnswer out;
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        out.content += e.text;
        break;
      case ToolCallEvent::Kind::kCallStart:
        out.calls.push_back({e.text, ""});
        break;
      case ToolCallEvent::Kind::kArguments:
        out.calls[static_cast<size_t>(e.index)].arguments += e.text;
        break;
    }
  }
  for (ToolCall& c : out.calls) {
    const json j = json::parse(c.arguments, nullptr, false);
    if (!j.is_discarded()) c.arguments = dump(j);
  }
  return out;
}

std::vector<ToolCallEvent> ToolCallStream::push(std::string_view text) {
  std::vector<ToolCallEvent> events;
  if (state_ == State::kDone) return events;
  pending_.append(text);
  run(false, &events);
  return events;
}

std::vector<ToolCallEvent> ToolCallStream::finish() {
  std::vector<ToolCallEvent> events;
  run(true, &events);
  pending_.clear();
  state_ = State::kDone;
  return events;
}

void ToolCallStream::emit_content(std::string_view text, std::vector<ToolCallEvent>* events) {
  if (!content_started_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    content_started_ = true;
  }
  if (text.empty()) return;
  if (!events->empty() && events->back().kind == ToolCallEvent::Kind::kContent) {
    events->back().text.append(text);
  } else {
    events->push_back({ToolCallEvent::Kind::kContent, -1, std::string(text)});
  }
}

void ToolCallStream::emit_arguments(std::string_view text, std::vector<ToolCallEvent>* events) {
  if (text.empty()) return;
  const int32_t index = n_calls_ - 1;
  if (!events->empty() && events->back().kind == ToolCallEvent::Kind::kArguments &&
      events->back().index == index) {
    events->back().text.append(text);
  } else {
    events->push_back({ToolCallEvent::Kind::kArguments, index, std::string(text)});
  }
}

// Consumes pending_ as far as it can be decided; with at_end, all of it.
void ToolCallStream::run(bool at_end, std::vector<ToolCallEvent>* events) {
  size_t used = 0;  // bytes of pending_ consumed
  for (bool progress = true; progress && state_ != State::kDone;) {
    progress = false;
    const std::string_view rest = std::string_view(pending_).substr(used);
    switch (state_) {
      case State::kContent: {
        const auto [pos, which] = find_first(rest, {kToolCallsBegin, kToolCallBegin});
        if (pos != std::string_view::npos) {
          // Whitespace before the marker is the end of the content: not emitted.
          std::string_view before = rest.substr(0, pos);
          while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
          emit_content(before, events);
          used += pos + (which == 0 ? kToolCallsBegin.size() : kToolCallBegin.size());
          state_ = which == 0 ? State::kBetween : State::kHeader;
          progress = true;
          break;
        }
        size_t n = at_end ? rest.size()
                          : rest.size() - partial_marker(rest, {kToolCallsBegin, kToolCallBegin});
        std::string_view emit = rest.substr(0, n);
        // Trailing whitespace waits for what follows it: the content may end there.
        while (!emit.empty() && is_space(emit.back())) emit.remove_suffix(1);
        emit_content(emit, events);
        used += at_end ? rest.size() : emit.size();
        break;
      }
      case State::kBetween: {
        const auto [pos, which] = find_first(rest, {kToolCallBegin, kToolCallsEnd});
        if (pos == std::string_view::npos) {
          used += at_end ? rest.size()
                         : rest.size() - partial_marker(rest, {kToolCallBegin, kToolCallsEnd});
          break;
        }
        used += pos + (which == 0 ? kToolCallBegin.size() : kToolCallsEnd.size());
        state_ = which == 0 ? State::kHeader : State::kDone;
        progress = true;
        break;
      }
      case State::kHeader: {
        const size_t nl = rest.find('\n');
        if (nl == std::string_view::npos) {
          if (at_end) used += rest.size();  // the name never ended: no call
          break;
        }
        std::string_view name = rest.substr(0, nl);
        if (size_t sep = name.find(kToolSep); sep != std::string_view::npos) {
          name.remove_prefix(sep + kToolSep.size());
        }
        events->push_back({ToolCallEvent::Kind::kCallStart, n_calls_++, std::string(trim(name))});
        used += nl + 1;
        state_ = State::kFence;
        progress = true;
        break;
      }
      case State::kFence: {
        // "```LANG\n" before the arguments, or not: decided by the first three bytes.
        if (rest.size() < kFence.size() && kFence.substr(0, rest.size()) == rest && !at_end) break;
        if (rest.substr(0, kFence.size()) == kFence) {
          used += kFence.size();
          state_ = State::kFenceLang;
        } else {
          state_ = State::kArguments;
        }
        progress = true;
        break;
      }
      case State::kFenceLang: {
        size_t n = 0;
        while (n < rest.size() && is_lang_char(rest[n])) ++n;
        if (n == rest.size()) {
          used += n;  // the language tag so far; its end is still to come
          break;
        }
        used += n + (rest[n] == '\n' ? 1 : 0);
        state_ = State::kArguments;
        progress = true;
        break;
      }
      case State::kArguments: {
        const auto [pos, which] = find_first(rest, {kArgumentsEnd, kToolCallEnd, kToolCallsEnd});
        if (pos == std::string_view::npos) {
          const size_t n = at_end ? rest.size()
                                  : rest.size() - partial_marker(rest, {kArgumentsEnd, kToolCallEnd,
                                                                        kToolCallsEnd});
          emit_arguments(rest.substr(0, n), events);
          used += n;
          break;
        }
        emit_arguments(rest.substr(0, pos), events);
        static constexpr std::array<std::string_view, 3> kEnds = {kArgumentsEnd, kToolCallEnd,
                                                                  kToolCallsEnd};
        used += pos + kEnds[which].size();
        state_ = which == 2 ? State::kDone : State::kBetween;
        progress = true;
        break;
      }
      case State::kDone:
        break;
    }
  }
  pending_.erase(0, used);
}

}  // namespace ponder::grammar
