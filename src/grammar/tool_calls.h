// Tool calls in DeepSeek-R1's own format: the prompt that lists the functions, the grammar of an
// answer that calls them, and the parser (whole or streamed) that takes the calls back out.
//
// R1's chat template writes an assistant's calls as plain text (in the R1-Distill-Qwen
// vocabulary these markers are ordinary text, not special tokens):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\nARGUMENTS\n```
//   <｜tool▁call▁end｜>  [\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜>]  <｜tool▁calls▁end｜>
// (one line here, no spaces in the real text). The template has no place for the function
// definitions, so render_tool_prompt() writes them for the system prompt. The grammar constrains
// the answer after </think>; parsing tolerates what an unconstrained answer gets wrong (a missing
// fence, a missing end marker). docs/tool-calls.md has the design.
// Depends on base, nlohmann::json and grammar/json_schema.h; nothing of the text or server layers.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ponder::grammar {

inline constexpr std::string_view kToolCallsBegin = "<｜tool▁calls▁begin｜>";
inline constexpr std::string_view kToolCallsEnd = "<｜tool▁calls▁end｜>";
inline constexpr std::string_view kToolCallBegin = "<｜tool▁call▁begin｜>";
inline constexpr std::string_view kToolCallEnd = "<｜tool▁call▁end｜>";
inline constexpr std::string_view kToolSep = "<｜tool▁sep｜>";

struct ToolFunction {
  std::string name;  // non-empty, no whitespace or control characters, unique among the tools
  std::string description;
  // A JSON Schema for the arguments. Null or {} (absent in the request) means {"type":"object"}:
  // the arguments of a call are always one JSON value, an object for every sane schema.
  nlohmann::json parameters = nlohmann::json::object({{"type", "object"}});
};

// The text that tells the model which functions exist and exactly how to call them (with an
// example of the format), or plain text when no call is needed. The caller appends it to the
// system prompt (after "\n\n" when that is not empty; R1's template keeps only the last system
// message). Deterministic: equal tools give equal bytes, which the prefix and response caches
// rely on. Empty for no tools.
std::string render_tool_prompt(const std::vector<ToolFunction>& tools);

// What the answer must be; tool_choice "none" has no grammar (the server sends no tools).
enum class ToolChoiceMode {
  kAuto,      // the calls, or plain text that does not start with the calls marker
  kRequired,  // the calls, to any of the tools
  kNamed,     // the calls, to the named function only
};

// The GBNF (root rule `root`) of the whole answer after </think>:
//   calls: <｜tool▁calls▁begin｜> one call (several, "\n"-separated, when `parallel`)
//          <｜tool▁calls▁end｜>, each call in the exact format above with NAME one of the tools
//          and ARGUMENTS valid for that tool's parameters (json_schema_rules: compact, or with
//          its bounded whitespace);
//   kAuto also allows plain text: optional whitespace, then a first character that is not '<',
//          or '<' not followed by '｜' (a text answer never starts like the calls marker).
// No leading newlines: compile with CompileOptions::leading_newlines for R1's "\n\n" after
// </think>. Errors: no tools, a bad or duplicate name, `named` not among the tools, a schema
// json_schema_rules refuses (named by the tool's index and name).
Expected<std::string> tool_call_grammar(const std::vector<ToolFunction>& tools, ToolChoiceMode mode,
                                        std::string_view named, bool parallel);

struct ToolCall {
  std::string name;
  // Compact JSON (re-serialized) when the raw text parses as JSON, else the raw text as written.
  std::string arguments;
};

struct ParsedAnswer {
  std::string content;  // the text before the calls, without surrounding whitespace
  std::vector<ToolCall> calls;
};

// Takes the calls out of an answer (the text after </think>). Exactly ToolCallStream fed the
// whole answer at once, then each call's arguments re-serialized.
ParsedAnswer parse_tool_calls(std::string_view answer);

struct ToolCallEvent {
  enum class Kind {
    kContent,    // text: plain answer text
    kCallStart,  // index, text: the function's name (complete)
    kArguments,  // index, text: the next piece of that call's raw arguments
  };
  Kind kind = Kind::kContent;
  int32_t index = -1;  // the call, from 0, for kCallStart and kArguments
  std::string text;
};

// The answer read as it is generated, for OpenAI's streamed delta.tool_calls: text is held back
// only while it could still be the start of a marker (or is whitespace that might end the
// content). How an answer is read:
//   content   everything before the first <｜tool▁calls▁begin｜> (or <｜tool▁call▁begin｜>
//             when the model forgot the former), whitespace trimmed at both ends;
//   a call    <｜tool▁call▁begin｜>, a header line "TYPE<｜tool▁sep｜>NAME\n" (NAME is the
//             line's text after <｜tool▁sep｜>, or the whole line without one, trimmed), an
//             optional fence line "```LANG\n", then the raw arguments up to the first "\n```",
//             <｜tool▁call▁end｜> or <｜tool▁calls▁end｜>, or the end of the answer;
//   between calls, text other than <｜tool▁call▁begin｜> is ignored; after
//             <｜tool▁calls▁end｜>, everything is.
// A call whose header line never ends (the answer stops inside its name) is dropped. The
// concatenated kContent texts equal ParsedAnswer::content, and a call's concatenated kArguments
// pieces equal its raw arguments, however the text is split into pushes.
class ToolCallStream {
 public:
  std::vector<ToolCallEvent> push(std::string_view text);
  // The end of the answer: flushes what was held back.
  std::vector<ToolCallEvent> finish();

 private:
  enum class State { kContent, kBetween, kHeader, kFence, kFenceLang, kArguments, kDone };
  void run(bool at_end, std::vector<ToolCallEvent>* events);
  void emit_content(std::string_view text, std::vector<ToolCallEvent>* events);
  void emit_arguments(std::string_view text, std::vector<ToolCallEvent>* events);

  State state_ = State::kContent;
  std::string pending_;           // received, not yet consumed
  bool content_started_ = false;  // a non-whitespace content character was emitted
  int32_t n_calls_ = 0;
};

}  // namespace ponder::grammar
