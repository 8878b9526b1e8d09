// Tool calls: the prompt is deterministic and names every tool; the grammar per tool_choice
// accepts the exact R1 format and refuses unknown names, bad arguments and extra calls; the
// parser reads the shapes a model writes; the stream gives the parser's calls however the text
// is split.
#include "grammar/tool_calls.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace ponder::grammar {
namespace {

using nlohmann::json;

std::vector<ToolFunction> weather_tools() {
  ToolFunction weather;
  weather.name = "get_weather";
  weather.description = "The current weather of a city.";
  weather.parameters = json::parse(R"({
    "type": "object",
    "properties": {
      "location": {"type": "string"},
      "unit": {"type": "string", "enum": ["c", "f"]}
    },
    "required": ["location"],
    "additionalProperties": false
  })");
  ToolFunction time;
  time.name = "get_time";
  time.description = "The time now, in UTC.";
  time.parameters = nullptr;  // absent: any object
  return {weather, time};
}

// One call in the exact format, without the outer markers.
std::string call(std::string_view name, std::string_view args) {
  return std::string(kToolCallBegin) + "function" + std::string(kToolSep) + std::string(name) +
         "\n```json\n" + std::string(args) + "\n```" + std::string(kToolCallEnd);
}

std::string calls(const std::vector<std::string>& each) {
  std::string s(kToolCallsBegin);
  for (size_t i = 0; i < each.size(); ++i) s += (i ? "\n" : "") + each[i];
  return s + std::string(kToolCallsEnd);
}

std::shared_ptr<Grammar> compile(const std::vector<ToolFunction>& tools, ToolChoiceMode mode,
                                 std::string_view named = "", bool parallel = false,
                                 CompileOptions options = {}) {
  auto gbnf = tool_call_grammar(tools, mode, named, parallel);
  EXPECT_TRUE(gbnf.has_value()) << gbnf.status().message();
  if (!gbnf.has_value()) return nullptr;
  auto g = Grammar::compile(*gbnf, options);
  EXPECT_TRUE(g.has_value()) << g.status().message() << "\n" << *gbnf;
  return g.has_value() ? *g : nullptr;
}

TEST(ToolPrompt, DeterministicAndNamesEveryTool) {
  const std::vector<ToolFunction> tools = weather_tools();
  const std::string prompt = render_tool_prompt(tools);
  EXPECT_EQ(prompt, render_tool_prompt(weather_tools()));
  for (const ToolFunction& f : tools) {
    EXPECT_NE(prompt.find("{\"name\":\"" + f.name + "\",\"description\":\"" + f.description),
              std::string::npos)
        << f.name;
  }
  // The schema as compact JSON; absent parameters are written as an object.
  EXPECT_NE(prompt.find(weather_tools()[0].parameters.dump()), std::string::npos);
  EXPECT_NE(prompt.find("\"parameters\":{\"type\":\"object\"}"), std::string::npos);
  // The format, as the model must write it.
  EXPECT_NE(prompt.find(std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
                        std::string(kToolSep) + "NAME\n```json\nARGUMENTS\n```" +
                        std::string(kToolCallEnd) + std::string(kToolCallsEnd)),
            std::string::npos);
  EXPECT_NE(prompt.find("plain text"), std::string::npos);
  // The same schema written with its keys in another order gives the same bytes.
  std::vector<ToolFunction> reordered = weather_tools();
  reordered[0].parameters = json::parse(R"({"additionalProperties": false, "required":
      ["location"], "properties": {"unit": {"enum": ["c", "f"], "type": "string"}, "location":
      {"type": "string"}}, "type": "object"})");
  EXPECT_EQ(render_tool_prompt(reordered), prompt);
  EXPECT_EQ(render_tool_prompt({}), "");
}

TEST(ToolGrammar, RequiredAcceptsACallAndRefusesTheRest) {
  auto g = compile(weather_tools(), ToolChoiceMode::kRequired);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(calls({call("get_weather", R"({"location":"Paris"})")})));
  EXPECT_TRUE(g->accepts(calls({call("get_weather", R"({"location": "Paris", "unit": "c"})")})));
  EXPECT_TRUE(g->accepts(calls({call("get_time", "{}")})));
  // An unknown function: refused at its name.
  const std::string head = std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
                           std::string(kToolSep);
  EXPECT_FALSE(g->accepts(calls({call("get_wether", R"({"location":"Paris"})")})));
  EXPECT_FALSE(g->accepts_prefix(head + "get_wet"));
  EXPECT_FALSE(g->accepts_prefix(head + "get_weather_now"));
  // Arguments that break the schema.
  EXPECT_FALSE(g->accepts(calls({call("get_weather", R"({"location":5})")})));
  EXPECT_FALSE(g->accepts(calls({call("get_weather", R"({"unit":"c"})")})));
  EXPECT_FALSE(g->accepts(calls({call("get_weather", R"({"location":"Paris","unit":"k"})")})));
  EXPECT_FALSE(g->accepts(calls({call("get_weather", R"({"location":"Paris","x":1})")})));
  EXPECT_FALSE(g->accepts(calls({call("get_time", "[]")})));
  // The format is exact: the end marker, the fences, no text around the calls.
  EXPECT_FALSE(g->accepts(head + "get_time\n```json\n{}\n```" + std::string(kToolCallEnd)));
  EXPECT_TRUE(g->accepts_prefix(head + "get_time\n```json\n{}\n```" + std::string(kToolCallEnd)));
  EXPECT_FALSE(g->accepts(calls({call("get_time", "{}")}) + "\nDone."));
  EXPECT_FALSE(g->accepts_prefix("Sure, " + head));
  EXPECT_FALSE(g->accepts("The weather is fine."));
  // Only one call unless parallel.
  EXPECT_FALSE(g->accepts(calls({call("get_time", "{}"), call("get_time", "{}")})));
}

TEST(ToolGrammar, ParallelAcceptsSeveralCalls) {
  auto g = compile(weather_tools(), ToolChoiceMode::kRequired, "", true);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(calls({call("get_time", "{}")})));
  EXPECT_TRUE(
      g->accepts(calls({call("get_weather", R"({"location":"Oslo"})"), call("get_time", "{}")})));
  EXPECT_TRUE(g->accepts(calls({call("get_time", "{}"), call("get_time", "{}"),
                                call("get_weather", R"({"location":"Lima"})")})));
  EXPECT_FALSE(g->accepts(calls({call("get_time", "{}"), call("get_weather", "{}")})));
  // Calls are separated by exactly one newline.
  EXPECT_FALSE(g->accepts(std::string(kToolCallsBegin) + call("get_time", "{}") + "\n\n" +
                          call("get_time", "{}") + std::string(kToolCallsEnd)));
}

TEST(ToolGrammar, AutoAllowsPlainText) {
  auto g = compile(weather_tools(), ToolChoiceMode::kAuto);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(calls({call("get_time", "{}")})));
  EXPECT_TRUE(g->accepts("The weather in Paris is mild."));
  EXPECT_TRUE(g->accepts("\n\nIt is 12:00.\nAnything else?"));
  EXPECT_TRUE(g->accepts("<b>bold</b> text"));
  EXPECT_TRUE(g->accepts("<"));
  EXPECT_TRUE(g->accepts("x" + calls({call("nope", "[")})));  // text: not constrained
  // Text never starts like the calls marker, so a started call stays a valid call.
  EXPECT_FALSE(g->accepts(calls({call("nope", "{}")})));
  EXPECT_FALSE(g->accepts("\n" + calls({call("get_weather", "{}")})));
  EXPECT_FALSE(g->accepts("<｜assistant"));
  EXPECT_FALSE(g->accepts(""));
  EXPECT_FALSE(g->accepts("\n\n"));
}

TEST(ToolGrammar, NamedCallsOnlyThatFunction) {
  auto g = compile(weather_tools(), ToolChoiceMode::kNamed, "get_weather");
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(calls({call("get_weather", R"({"location":"Rome"})")})));
  EXPECT_FALSE(g->accepts(calls({call("get_time", "{}")})));
  EXPECT_FALSE(g->accepts("It is sunny."));
  auto missing = tool_call_grammar(weather_tools(), ToolChoiceMode::kNamed, "get_tide", false);
  ASSERT_FALSE(missing.has_value());
  EXPECT_NE(missing.status().message().find("get_tide"), std::string::npos);
  EXPECT_NE(missing.status().message().find("get_weather"), std::string::npos);
}

TEST(ToolGrammar, LeadingNewlinesAfterThinking) {
  CompileOptions options;
  options.leading_newlines = 2;
  auto g = compile(weather_tools(), ToolChoiceMode::kRequired, "", false, options);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts("\n\n" + calls({call("get_time", "{}")})));
}

TEST(ToolGrammar, BadToolsAreErrors) {
  EXPECT_FALSE(tool_call_grammar({}, ToolChoiceMode::kAuto, "", false).has_value());
  std::vector<ToolFunction> dup = weather_tools();
  dup[1].name = "get_weather";
  auto d = tool_call_grammar(dup, ToolChoiceMode::kRequired, "", false);
  ASSERT_FALSE(d.has_value());
  EXPECT_NE(d.status().message().find("tools[1]"), std::string::npos);
  std::vector<ToolFunction> spaced = weather_tools();
  spaced[0].name = "get weather";
  auto s = tool_call_grammar(spaced, ToolChoiceMode::kRequired, "", false);
  ASSERT_FALSE(s.has_value());
  EXPECT_NE(s.status().message().find("get weather"), std::string::npos);
  std::vector<ToolFunction> empty = weather_tools();
  empty[0].name.clear();
  EXPECT_FALSE(tool_call_grammar(empty, ToolChoiceMode::kAuto, "", false).has_value());
}

// A name with quotes and a backslash is written as a GBNF literal correctly.
TEST(ToolGrammar, NamesAreEscaped) {
  std::vector<ToolFunction> tools(1);
  tools[0].name = R"(odd"name\x)";
  auto g = compile(tools, ToolChoiceMode::kRequired);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(calls({call(tools[0].name, "{}")})));
}

TEST(ToolParse, Shapes) {
  {
    const ParsedAnswer a = parse_tool_calls("\n\n  The weather is fine.\n");
    EXPECT_EQ(a.content, "The weather is fine.");
    EXPECT_TRUE(a.calls.empty());
  }
  {
    const ParsedAnswer a =
        parse_tool_calls("\n\n" + calls({call("get_weather", "{\"location\": \"Paris\"}")}));
    EXPECT_EQ(a.content, "");
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].name, "get_weather");
    EXPECT_EQ(a.calls[0].arguments, R"({"location":"Paris"})");
  }
  {  // content first, two calls, arguments re-serialized compactly
    const ParsedAnswer a = parse_tool_calls(
        "Let me check both.\n\n" +
        calls({call("get_weather", "{ \"location\" : \"Oslo\",\n  \"unit\": \"c\" }"),
               call("get_time", "{}")}));
    EXPECT_EQ(a.content, "Let me check both.");
    ASSERT_EQ(a.calls.size(), 2u);
    EXPECT_EQ(a.calls[0].name, "get_weather");
    EXPECT_EQ(a.calls[0].arguments, R"({"location":"Oslo","unit":"c"})");
    EXPECT_EQ(a.calls[1].name, "get_time");
    EXPECT_EQ(a.calls[1].arguments, "{}");
  }
  {  // no fence, no <｜tool▁calls▁end｜>
    const ParsedAnswer a =
        parse_tool_calls(std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
                         std::string(kToolSep) + "f\n{\"a\": [1, 2]}" + std::string(kToolCallEnd));
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].name, "f");
    EXPECT_EQ(a.calls[0].arguments, R"({"a":[1,2]})");
  }
  {  // no <｜tool▁calls▁begin｜>, no type, a bare ``` fence, stops after the arguments
    const ParsedAnswer a =
        parse_tool_calls("ok " + std::string(kToolCallBegin) + " g \n```\n{\"b\":true}\n```");
    EXPECT_EQ(a.content, "ok");
    ASSERT_EQ(a.calls.size(), 1u);
    EXPECT_EQ(a.calls[0].name, "g");
    EXPECT_EQ(a.calls[0].arguments, R"({"b":true})");
  }
  {  // invalid JSON is kept as written; a truncated call keeps what it has
    const ParsedAnswer a = parse_tool_calls(std::string(kToolCallsBegin) + call("f", "{'a': 1}") +
                                            "\n" + std::string(kToolCallBegin) + "function" +
                                            std::string(kToolSep) + "g\n```json\n{\"x\": \"abc");
    ASSERT_EQ(a.calls.size(), 2u);
    EXPECT_EQ(a.calls[0].arguments, "{'a': 1}");
    EXPECT_EQ(a.calls[1].name, "g");
    EXPECT_EQ(a.calls[1].arguments, "{\"x\": \"abc");
  }
  {  // the answer stops inside a name: no call; text after the calls is ignored
    const ParsedAnswer a =
        parse_tool_calls(std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
                         std::string(kToolSep) + "get_wea");
    EXPECT_TRUE(a.calls.empty());
    const ParsedAnswer b = parse_tool_calls(calls({call("f", "{}")}) + "\nBye.");
    ASSERT_EQ(b.calls.size(), 1u);
    EXPECT_EQ(b.content, "");
  }
  {  // a marker-like text that is not one stays content
    const ParsedAnswer a = parse_tool_calls("Use <｜tool▁ to start <b>x</b>  ");
    EXPECT_EQ(a.content, "Use <｜tool▁ to start <b>x</b>");
    EXPECT_TRUE(a.calls.empty());
  }
}

struct Streamed {
  std::string content;
  std::vector<ToolCall> calls;  // raw arguments
};

void collect(const std::vector<ToolCallEvent>& events, Streamed* s) {
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        EXPECT_FALSE(e.text.empty());
        s->content += e.text;
        break;
      case ToolCallEvent::Kind::kCallStart:
        ASSERT_EQ(e.index, static_cast<int32_t>(s->calls.size()));
        s->calls.push_back({e.text, ""});
        break;
      case ToolCallEvent::Kind::kArguments:
        ASSERT_EQ(e.index + 1, static_cast<int32_t>(s->calls.size()));  // the open call only
        EXPECT_FALSE(e.text.empty());
        s->calls.back().arguments += e.text;
        break;
    }
  }
}

Streamed stream_in_pieces(std::string_view text, const std::vector<size_t>& sizes) {
  ToolCallStream stream;
  Streamed s;
  size_t i = 0;
  for (size_t k = 0; i < text.size(); ++k) {
    const size_t n = std::min(sizes[k % sizes.size()], text.size() - i);
    collect(stream.push(text.substr(i, n)), &s);
    i += n;
  }
  collect(stream.finish(), &s);
  return s;
}

TEST(ToolStream, AnySplitGivesTheParsedCalls) {
  const std::vector<std::string> answers = {
      "\n\nPlain answer, with a < sign and <｜ half a marker.\n\n",
      "\n\n" + calls({call("get_weather", "{\"location\": \"Paris\"}")}),
      "Checking.\n" + calls({call("a", "{\"s\": \"x\\n```y\"}"), call("b", "{\n  \"n\": 1\n}")}),
      std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
          std::string(kToolSep) + "f\n{\"a\": 1}" + std::string(kToolCallEnd) +
          std::string(kToolCallsEnd),
      std::string(kToolCallBegin) + "g\n```\n[1, 2]\n```",
      std::string(kToolCallsBegin) + call("f", "{'bad': 1}") + "\n" + std::string(kToolCallBegin) +
          "function" + std::string(kToolSep) + "g\n```json\n{\"x",
      std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
          std::string(kToolSep) + "cut",
      "x <｜tool▁call",
      "",
  };
  std::mt19937 rng(12345);
  for (const std::string& answer : answers) {
    const ParsedAnswer parsed = parse_tool_calls(answer);
    const Streamed whole = stream_in_pieces(answer, {answer.size() + 1});
    EXPECT_EQ(whole.content, parsed.content) << answer;
    ASSERT_EQ(whole.calls.size(), parsed.calls.size()) << answer;
    for (size_t c = 0; c < parsed.calls.size(); ++c) {
      EXPECT_EQ(whole.calls[c].name, parsed.calls[c].name);
      // The raw pieces re-serialized are the parsed arguments.
      const json j = json::parse(whole.calls[c].arguments, nullptr, false);
      EXPECT_EQ(j.is_discarded() ? whole.calls[c].arguments : j.dump(), parsed.calls[c].arguments)
          << answer;
    }
    std::vector<std::vector<size_t>> splits = {{1}, {2}, {3}, {5}, {7}};
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<size_t> sizes(16);
      for (size_t& n : sizes) n = 1 + rng() % 12;
      splits.push_back(sizes);
    }
    for (const std::vector<size_t>& sizes : splits) {
      const Streamed s = stream_in_pieces(answer, sizes);
      EXPECT_EQ(s.content, whole.content) << answer;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << answer;
      for (size_t c = 0; c < s.calls.size(); ++c) {
        EXPECT_EQ(s.calls[c].name, whole.calls[c].name) << answer;
        EXPECT_EQ(s.calls[c].arguments, whole.calls[c].arguments) << answer;
      }
    }
  }
}

// Answers glued from pieces of the format (whole and cut markers, fences, newlines, text): how
// the stream is split never changes what it reads.
TEST(ToolStream, RandomAnswersAnySplit) {
  const std::vector<std::string> pieces = {std::string(kToolCallsBegin),
                                           std::string(kToolCallsEnd),
                                           std::string(kToolCallBegin),
                                           std::string(kToolCallEnd),
                                           std::string(kToolSep),
                                           "<｜tool▁call",
                                           "<｜tool▁",
                                           "\n",
                                           "```",
                                           "``",
                                           "json",
                                           "{\"a\": 1}",
                                           " ",
                                           "x",
                                           "<",
                                           "function"};
  std::mt19937 rng(777);
  for (int n = 0; n < 2000; ++n) {
    std::string answer;
    const int len = 1 + static_cast<int>(rng() % 14);
    for (int i = 0; i < len; ++i) answer += pieces[rng() % pieces.size()];
    const Streamed whole = stream_in_pieces(answer, {answer.size() + 1});
    std::vector<size_t> sizes(8);
    for (size_t& s : sizes) s = 1 + rng() % 9;
    for (const std::vector<size_t>& split : {std::vector<size_t>{1}, sizes}) {
      const Streamed s = stream_in_pieces(answer, split);
      ASSERT_EQ(s.content, whole.content) << answer;
      ASSERT_EQ(s.calls.size(), whole.calls.size()) << answer;
      for (size_t c = 0; c < s.calls.size(); ++c) {
        ASSERT_EQ(s.calls[c].name, whole.calls[c].name) << answer;
        ASSERT_EQ(s.calls[c].arguments, whole.calls[c].arguments) << answer;
      }
    }
  }
}

// Text goes out as soon as it cannot be a marker; a call's name at its newline; its arguments
// as they come, without the fences.
TEST(ToolStream, HoldsBackOnlyWhatCouldBeAMarker) {
  ToolCallStream stream;
  auto e = stream.push("\n\nHello wor");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, ToolCallEvent::Kind::kContent);
  EXPECT_EQ(e[0].text, "Hello wor");
  e = stream.push("ld <");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, "ld");
  EXPECT_TRUE(stream.push("｜tool▁").empty());
  e = stream.push("x");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, " <｜tool▁x");

  ToolCallStream calls_stream;
  EXPECT_TRUE(calls_stream
                  .push(std::string(kToolCallsBegin) + std::string(kToolCallBegin) + "function" +
                        std::string(kToolSep) + "get_weather")
                  .empty());
  e = calls_stream.push("\n```json\n{\"location\":");
  ASSERT_EQ(e.size(), 2u);
  EXPECT_EQ(e[0].kind, ToolCallEvent::Kind::kCallStart);
  EXPECT_EQ(e[0].index, 0);
  EXPECT_EQ(e[0].text, "get_weather");
  EXPECT_EQ(e[1].kind, ToolCallEvent::Kind::kArguments);
  EXPECT_EQ(e[1].text, "{\"location\":");
  e = calls_stream.push(" \"Paris\"}\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].text, " \"Paris\"}");
  EXPECT_TRUE(calls_stream.push("``").empty());
  EXPECT_TRUE(
      calls_stream.push("`" + std::string(kToolCallEnd) + std::string(kToolCallsEnd)).empty());
  EXPECT_TRUE(calls_stream.finish().empty());
}

}  // namespace
}  // namespace ponder::grammar
