// JSON Schema -> GBNF: every supported keyword's grammar parses, compiles, accepts the documents
// the schema accepts and refuses the others; integer and number bounds are checked exhaustively
// over a range; unsupported keywords, types, formats and bad $refs are errors naming them and
// where they are. nlohmann::json keeps object keys sorted, so the properties here are declared
// (and expected) in alphabetical order.
#include "grammar/json_schema.h"

#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/grammar.h"

namespace ponder::grammar {
namespace {

using nlohmann::json;

std::shared_ptr<Grammar> compile_text(const std::string& gbnf) {
  auto rules = parse_gbnf(gbnf);
  if (!rules.has_value()) {
    ADD_FAILURE() << rules.status().message() << "\n" << gbnf;
    return nullptr;
  }
  auto g = Grammar::compile(gbnf);
  if (!g.has_value()) {
    ADD_FAILURE() << g.status().message() << "\n" << gbnf;
    return nullptr;
  }
  return *g;
}

std::shared_ptr<Grammar> compile_schema(const json& schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  if (!gbnf.has_value()) {
    ADD_FAILURE() << gbnf.status().message() << "\nschema: " << schema.dump();
    return nullptr;
  }
  return compile_text(*gbnf);
}

// Every document of `good` accepted, every one of `bad` refused.
void check(const json& schema, std::initializer_list<std::string_view> good,
           std::initializer_list<std::string_view> bad) {
  auto g = compile_schema(schema);
  if (g == nullptr) return;
  for (std::string_view d : good) {
    EXPECT_TRUE(g->accepts(d)) << "should accept " << d << "\nschema: " << schema.dump() << "\n"
                               << g->text();
  }
  for (std::string_view d : bad) {
    EXPECT_FALSE(g->accepts(d)) << "should refuse " << d << "\nschema: " << schema.dump() << "\n"
                                << g->text();
  }
}

std::string error_of(const json& schema) {
  auto gbnf = json_schema_to_gbnf(schema);
  return gbnf.has_value() ? "" : gbnf.status().message();
}

TEST(JsonSchemaTest, AnyValue) {
  for (const json& schema :
       {json::parse("{}"), json(true), json::parse(R"({"description": "x"})")}) {
    check(schema,
          {"1", "-2.5e3", "\"s\"", "true", "null", "[]", "{}", R"({"a": [1, {"b": null}]})"},
          {"", "nul", "[1,]", "{\"a\"}", " 1", "1 ", "'s'"});
  }
}

TEST(JsonSchemaTest, BoundedWhitespace) {
  const json schema = json::parse(R"({"type": "object", "properties": {"a": {"type": "array"}}})");
  check(schema,
        {R"({"a":[1,2]})", "{ \"a\" : [ 1 , 2 ] }", "{\n  \"a\": [\n    1,\n    2\n  ]\n}",
         "{\n\t\"a\": []\n}"},
        {" {\"a\":[]}", "{\"a\":[]} ", "{  \"a\":[]}", "{\"a\":[]\n\n}",
         "{\n" + std::string(21, ' ') + "\"a\":[]}"});
}

TEST(JsonSchemaTest, Types) {
  check(json::parse(R"({"type": "string"})"), {"\"\"", "\"abc\""}, {"abc", "1", "null", "\"a"});
  check(json::parse(R"({"type": "boolean"})"), {"true", "false"}, {"1", "\"true\"", "True"});
  check(json::parse(R"({"type": "null"})"), {"null"}, {"0", "\"null\"", ""});
  check(json::parse(R"({"type": "object"})"), {"{}", R"({"x": {"y": [1]}})"}, {"[]", "null"});
  check(json::parse(R"({"type": "array"})"), {"[]", R"([1, "a", {}])"}, {"{}", "[1,]"});
  check(json::parse(R"({"type": ["string", "null"]})"), {"\"a\"", "null"}, {"1", "true"});
  check(json::parse(R"({"type": ["integer", "boolean"]})"), {"3", "false"}, {"3.5", "null"});
}

TEST(JsonSchemaTest, Numbers) {
  check(json::parse(R"({"type": "number"})"),
        {"0", "-0", "12", "-1.5", "0.25", "1e5", "1E+5", "-2.5e-3", "1234567890123456"},
        {"01", "1.", ".5", "+1", "1e", "--1", "0x10", "NaN", "12345678901234567",
         "0." + std::string(17, '1')});
  check(json::parse(R"({"type": "integer"})"), {"0", "-7", "1234567890123456"},
        {"1.0", "1e3", "007", "12345678901234567", "-"});
}

TEST(JsonSchemaTest, StringCharactersAndEscapes) {
  check(json::parse(R"({"type": "string"})"),
        {R"("a\"b")", R"("\\ \/ \b \f \n \r \t")", R"("\u00e9\uD83D\uDE00")", R"("\uFFFF\ud7ff")",
         "\"h\xC3\xA9llo \xF0\x9F\x98\x80\"", "\"\xE6\x97\xA5\xE6\x9C\xAC\""},
        {"\"a\"b\"", R"("\x41")", R"("\u12")", "\"tab\there\"", "\"new\nline\"", "\"\xC3\"",
         "\"\xED\xA0\x80\"", R"("\uDC00")", R"("\ud800")", R"("\uD800x")", R"("\uD83D\u0041")"});
}

TEST(JsonSchemaTest, LengthsCountCharacters) {
  const json schema = json::parse(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  check(schema,
        {"\"ab\"", "\"abc\"", "\"\xC3\xA9\xE6\x97\xA5\"", "\"\xF0\x9F\x98\x80\xF0\x9F\x98\x80\"",
         R"("\n\u00e9x")"},
        {"\"a\"", "\"abcd\"", "\"\xC3\xA9\"", R"("\n")", R"("\n\t\r\b")"});
  check(json::parse(R"({"type": "string", "maxLength": 0})"), {"\"\""}, {"\"a\""});
  check(json::parse(R"({"minLength": 1})"), {"\"a\""}, {"\"\"", "1"});
}

TEST(JsonSchemaTest, PropertiesRequiredAndOrder) {
  const json schema = json::parse(R"({
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}, "c": {"type": "boolean"}},
    "required": ["b"],
    "additionalProperties": false})");
  check(schema,
        {R"({"b":"x"})", R"({"a":1,"b":"x"})", R"({"b":"x","c":true})",
         R"({"a":1,"b":"x","c":false})"},
        {"{}", R"({"a":1})", R"({"b":"x","a":1})", R"({"c":true,"b":"x"})", R"({"b":"x","d":1})",
         R"({"b":1})", R"({"b":"x",})", R"({,"b":"x"})", R"({"a":1,,"b":"x"})"});
  // All optional: any ordered subset, the empty object too.
  const json optional =
      json::parse(R"({"properties": {"a": {"type": "integer"}, "b": {"type": "null"}},
                                         "additionalProperties": false})");
  check(optional, {"{}", R"({"a":1})", R"({"b":null})", R"({"a":1,"b":null})"},
        {R"({"b":null,"a":1})", R"({"a":1,"a":1})", R"({"c":1})"});
}

TEST(JsonSchemaTest, OrderedJsonKeepsDeclarationOrder) {
  const char* text = R"({"type": "object", "additionalProperties": false,
                         "properties": {"steps": {"type": "array"}, "answer": {"type": "string"}},
                         "required": ["steps", "answer"]})";
  auto gbnf = json_schema_to_gbnf(nlohmann::ordered_json::parse(text));
  ASSERT_TRUE(gbnf.has_value()) << gbnf.status().message();
  auto g = compile_text(*gbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(R"({"steps":[],"answer":"x"})"));
  EXPECT_FALSE(g->accepts(R"({"answer":"x","steps":[]})"));
  auto rules = json_schema_rules(nlohmann::ordered_json::parse(text), "f");
  ASSERT_TRUE(rules.has_value());
  EXPECT_LT(rules->find("steps"), rules->find("answer"));
  // nlohmann::json has sorted the keys before the converter sees them.
  check(json::parse(text), {R"({"answer":"x","steps":[]})"}, {R"({"steps":[],"answer":"x"})"});
}

TEST(JsonSchemaTest, AdditionalProperties) {
  // Absent (or true): extra pairs with any value, after the declared ones, never a declared key.
  const json open = json::parse(R"({"type": "object", "properties": {"id": {"type": "integer"}},
                                     "required": ["id"]})");
  check(open, {R"({"id":1})", R"({"id":1,"x":[true],"y":{"z":null}})", R"({"id":1,"i":2,"idx":3})"},
        {R"({"x":1,"id":1})", R"({"id":1,"id":2})", R"({"x":1})"});
  check(json::parse(R"({"properties": {"id": {}}, "additionalProperties": true})"),
        {"{}", R"({"q":1})", R"({"id":1,"q":2})"}, {R"({"id":1,"id":2})"});
  // A schema: the extra values follow it (a map).
  check(json::parse(R"({"type": "object", "additionalProperties": {"type": "integer"}})"),
        {"{}", R"({"a":1,"b":2})"}, {R"({"a":"x"})"});
  // Required keys not in properties take additionalProperties' schema.
  check(json::parse(R"({"required": ["k"], "additionalProperties": {"type": "string"}})"),
        {R"({"k":"v"})", R"({"k":"v","z":"w"})"}, {"{}", R"({"k":1})"});
  EXPECT_NE(
      error_of(json::parse(R"({"required": ["k"], "additionalProperties": false})")).find("'k'"),
      std::string::npos);
  // A property whose schema is false must not appear.
  check(json::parse(R"({"properties": {"a": false, "b": {}}, "additionalProperties": true})"),
        {R"({"b":1})", R"({"c":1})"}, {R"({"a":1})"});
}

TEST(JsonSchemaTest, EnumAndConst) {
  check(json::parse(R"({"enum": ["red", 1, 2.5, null, true, [1, "x"], {"k": "v"}, "h\u00e9"]})"),
        {"\"red\"", "1", "2.5", "null", "true", R"([1,"x"])", R"({"k":"v"})", "\"h\xC3\xA9\""},
        {"\"blue\"", "\"Red\"", "2", "false", R"([1, "x"])", R"({"k":"w"})"});
  check(json::parse(R"({"type": "string", "enum": ["a", 1, "b"]})"), {"\"a\"", "\"b\""}, {"1"});
  check(json::parse(R"({"const": {"a": [1, "q\"uote"]}})"), {R"({"a":[1,"q\"uote"]})"},
        {R"({"a":[1]})"});
  check(json::parse(R"({"const": "x", "description": "only x"})"), {"\"x\""}, {"\"y\""});
}

TEST(JsonSchemaTest, AnyOfAndOneOf) {
  check(json::parse(R"({"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]})"),
        {"1", "\"a\""}, {"\"ab\"", "null"});
  check(json::parse(R"({"oneOf": [{"const": 1}, {"const": 2}], "title": "t"})"), {"1", "2"}, {"3"});
  // Optional[X] as Pydantic writes it.
  check(json::parse(R"({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null})"),
        {"\"s\"", "null"}, {"1"});
  // Keywords beside anyOf apply to every alternative.
  check(json::parse(R"({"type": "object", "properties": {"a": {}, "b": {}},
                        "additionalProperties": false,
                        "anyOf": [{"required": ["a"]}, {"required": ["b"]}]})"),
        {R"({"a":1})", R"({"b":1})", R"({"a":1,"b":2})"}, {"{}"});
  check(json::parse(R"({"type": "string", "anyOf": [{"type": "integer"}, {"maxLength": 1}]})"),
        {"\"a\""}, {"1", "\"ab\""});
}

TEST(JsonSchemaTest, AllOfMergesObjects) {
  const json schema = json::parse(R"({"allOf": [
      {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
      {"properties": {"b": {"type": "string"}}, "required": ["b"], "additionalProperties": false}]})");
  check(schema, {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x"})", R"({"a":1,"b":"x","c":0})"});
  // A property in both members: both schemas hold.
  check(json::parse(R"({"allOf": [{"properties": {"s": {"type": "string"}}, "required": ["s"]},
                                  {"properties": {"s": {"maxLength": 2}}}],
                        "additionalProperties": false})"),
        {R"({"s":"ab"})"}, {R"({"s":"abc"})", R"({"s":1})"});
  // One member, as Pydantic v1 writes a described reference.
  check(json::parse(R"({"definitions": {"C": {"enum": ["r", "g"]}},
                        "allOf": [{"$ref": "#/definitions/C"}], "description": "color"})"),
        {"\"r\""}, {"\"b\""});
  EXPECT_NE(error_of(json::parse(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})"))
                .find("'type'"),
            std::string::npos);
  EXPECT_NE(
      error_of(json::parse(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})")).find("'pattern'"),
      std::string::npos);
}

TEST(JsonSchemaTest, Arrays) {
  check(json::parse(
            R"({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3})"),
        {"[1]", "[1,2,3]", "[ 1 , 2 ]"}, {"[]", "[1,2,3,4]", "[\"a\"]", "[1,]"});
  check(json::parse(R"({"items": {"type": "string"}})"), {"[]", R"(["a","b"])"}, {"[1]", "{}"});
  check(json::parse(R"({"type": "array", "minItems": 2})"), {"[1,\"x\"]", "[1,2,3]"}, {"[1]"});
  check(json::parse(R"({"type": "array", "maxItems": 0})"), {"[]", "[ ]"}, {"[1]"});
}

TEST(JsonSchemaTest, Tuples) {
  check(
      json::parse(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})"),
      {"[]", "[1]", R"([1,"a"])"}, {R"([1,"a",2])", R"(["a"])"});
  check(json::parse(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}],
                        "minItems": 2, "maxItems": 2})"),
        {R"([1,"a"])"}, {"[1]", R"([1,"a",1])"});
  check(json::parse(
            R"({"prefixItems": [{"const": 0}], "items": {"type": "boolean"}, "minItems": 3})"),
        {"[0,true,false]", "[0,true,false,true]"}, {"[0,true]", "[1,true,false]", "[0,1,true]"});
  // Draft 7: items as an array, additionalItems for the rest.
  check(json::parse(R"({"items": [{"type": "null"}], "additionalItems": {"type": "integer"}})"),
        {"[]", "[null]", "[null,1,2]"}, {"[1]", "[null,null]"});
  EXPECT_NE(error_of(json::parse(R"({"additionalItems": false})")).find("'additionalItems'"),
            std::string::npos);
}

TEST(JsonSchemaTest, Patterns) {
  check(json::parse(R"({"type": "string", "pattern": "^\\d{3}-[A-Z]{2,}(x|yz)?$"})"),
        {"\"123-AB\"", "\"123-ABCx\"", "\"000-QQyz\""},
        {"\"12-AB\"", "\"123-A\"", "\"123-ABz\"", "\"x123-AB\""});
  check(json::parse(R"({"pattern": "[^a-c]+\\.json"})"), {"\"x.json\"", "\"\\\"q\\\\.json\""},
        {"\"a.json\"", "\"xjson\""});
  check(json::parse(R"({"pattern": "\\w+\\s\\S*"})"), {"\"ab_1 \"", "\"a\\tb\""},
        {"\"a\"", "\"- a\""});
  check(json::parse(R"({"pattern": "a.c"})"),
        {"\"abc\"", "\"a\\\"c\"",
         "\"a\xC3\xA9"
         "c\""},
        {"\"a\\nc\"", "\"ac\""});
  check(json::parse(R"({"pattern": "(?:ab)*c{2}d+?e{1,}[\\d.]{0,2}"})"),
        {"\"ccde\"", "\"ababccddee1.\""}, {"\"abccd\"", "\"ccde123\""});
  check(json::parse(R"({"pattern": "\"\\n\\u00e9|\\x41"})"), {"\"\\\"\\n\xC3\xA9\"", "\"A\""},
        {"\"\\\"\\u000a\xC3\xA9\"", "\"B\""});
  check(json::parse(R"({"pattern": "^(a|)$"})"), {"\"\"", "\"a\""}, {"\"aa\""});
  check(json::parse(R"({"pattern": "[\u03b1-\u03c9]{2}"})"), {"\"\xCE\xB1\xCF\x89\""}, {"\"ab\""});
}

TEST(JsonSchemaTest, PatternErrorsNameThePattern) {
  for (const char* pattern : {"(?=a)b", "(?!a)", "(?<=a)b", "(a)\\1", "\\bword", "a^b", "a$b",
                              "\\p{L}", "(a", "a)", "[a", "*a", "a{3,2}"}) {
    const std::string e = error_of(json{{"type", "string"}, {"pattern", pattern}});
    EXPECT_NE(e.find("'pattern'"), std::string::npos) << pattern << ": " << e;
  }
  const std::string e = error_of(json::parse(R"j({"properties": {"p": {"pattern": "(?=x)"}}})j"));
  EXPECT_NE(e.find("/properties/p"), std::string::npos) << e;
  EXPECT_NE(e.find("lookaround"), std::string::npos) << e;
}

TEST(JsonSchemaTest, Formats) {
  check(json::parse(R"({"type": "string", "format": "date"})"),
        {"\"2024-02-29\"", "\"1999-12-31\""},
        {"\"2024-13-01\"", "\"2024-00-10\"", "\"2024-01-32\"", "\"2024-1-01\"", "\"24-01-01\""});
  check(json::parse(R"({"type": "string", "format": "time"})"),
        {"\"23:59:59Z\"", "\"00:00:00.123+05:30\""},
        {"\"24:00:00Z\"", "\"12:60:00Z\"", "\"12:00\""});
  check(json::parse(R"({"type": "string", "format": "date-time"})"),
        {"\"2024-01-31T12:30:00Z\"", "\"2024-01-31t12:30:00.5-08:00\""},
        {"\"2024-01-31\"", "\"2024-01-31T12:30Z\""});
  check(json::parse(R"({"type": "string", "format": "uuid"})"),
        {"\"123e4567-e89b-12d3-A456-426614174000\""},
        {"\"123e4567e89b12d3a456426614174000\"", "\"123e4567-e89b-12d3-a456-42661417400g\""});
  check(json::parse(R"({"type": "string", "format": "email"})"),
        {"\"a.b+c@example.co.uk\"", "\"x@y.io\""},
        {"\"a@b\"", "\"@b.com\"", "\"a b@c.com\"", "\"a@-b.com\""});
  check(json::parse(R"({"type": "string", "format": "ipv4"})"), {"\"10.0.255.1\""},
        {"\"256.0.0.1\"", "\"1.2.3\"", "\"01.2.3.4\""});
  check(json::parse(R"({"type": "string", "format": "hostname"})"),
        {"\"example.com\"", "\"localhost\""}, {"\"-a.com\"", "\"a..b\""});
  check(json::parse(R"({"type": "string", "format": "uri"})"), {"\"https://x.org/a?b=1#c\""},
        {"\"x.org\"", "\"http://a b\""});
  EXPECT_NE(error_of(json::parse(R"({"type": "string", "format": "ipv6"})")).find("ipv6"),
            std::string::npos);
  check(json::parse(R"({"type": "integer", "format": "int32"})"), {"2147483647", "-2147483648"},
        {"2147483648", "-2147483649"});
}

// Writes integers and checks each against [lo, hi] computed here.
void check_integers(const json& schema, int64_t lo, int64_t hi) {
  auto g = compile_schema(schema);
  if (g == nullptr) return;
  for (int64_t v = -1100; v <= 1100; ++v) {
    EXPECT_EQ(g->accepts(std::to_string(v)), v >= lo && v <= hi) << v << " " << schema.dump();
  }
  EXPECT_FALSE(g->accepts("-0")) << schema.dump();
  EXPECT_FALSE(g->accepts("1.0")) << schema.dump();
}

TEST(JsonSchemaTest, IntegerBoundsAreExact) {
  const int64_t kBig = 10000;
  check_integers(json::parse(R"({"type": "integer", "minimum": 0})"), 0, kBig);
  check_integers(json::parse(R"({"type": "integer", "minimum": 1, "maximum": 100})"), 1, 100);
  check_integers(json::parse(R"({"type": "integer", "minimum": -57, "maximum": 1003})"), -57, 1003);
  check_integers(json::parse(R"({"type": "integer", "maximum": -10})"), -kBig, -10);
  check_integers(json::parse(R"({"type": "integer", "minimum": -999, "maximum": -100})"), -999,
                 -100);
  check_integers(
      json::parse(R"({"type": "integer", "exclusiveMinimum": 9, "exclusiveMaximum": 100})"), 10,
      99);
  check_integers(json::parse(R"({"type": "integer", "minimum": 2.5, "maximum": 7.9})"), 3, 7);
  check_integers(json::parse(R"({"type": "integer", "minimum": -2.5, "exclusiveMaximum": 0})"), -2,
                 -1);
  check_integers(json::parse(R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true})"), 6,
                 kBig);
  check_integers(json::parse(R"({"type": "integer", "minimum": 0, "maximum": 0})"), 0, 0);
  check(json::parse(R"({"type": "integer", "minimum": 0})"), {"9999999999999999"},
        {"-1", "-0", "10000000000000000"});
  EXPECT_NE(error_of(json::parse(R"({"type": "integer", "minimum": 5, "maximum": 4})")), "");
}

// Numbers with up to 3 fraction digits over [-3, 3], each written plainly and with a trailing
// zero, checked against [lo, hi] in thousandths.
void check_numbers(const json& schema, int64_t lo, bool lo_strict, int64_t hi, bool hi_strict) {
  auto g = compile_schema(schema);
  if (g == nullptr) return;
  for (int64_t k = -3100; k <= 3100; ++k) {
    const bool in = (lo_strict ? k > lo : k >= lo) && (hi_strict ? k < hi : k <= hi);
    const int64_t a = k < 0 ? -k : k;
    std::string text = k < 0 ? "-" : "";
    text += std::to_string(a / 1000);
    std::string frac = std::to_string(1000 + a % 1000).substr(1);
    while (!frac.empty() && frac.back() == '0') frac.pop_back();
    if (!frac.empty()) text += "." + frac;
    EXPECT_EQ(g->accepts(text), in) << text << " " << schema.dump();
    const std::string padded = text + (frac.empty() ? ".0" : "0");
    EXPECT_EQ(g->accepts(padded), in) << padded << " " << schema.dump();
  }
}

TEST(JsonSchemaTest, NumberBoundsAreExact) {
  const int64_t kInf = 1000000;
  check_numbers(json::parse(R"({"type": "number", "minimum": 0})"), 0, false, kInf, false);
  check_numbers(json::parse(R"({"type": "number", "exclusiveMinimum": 0})"), 0, true, kInf, false);
  check_numbers(json::parse(R"({"type": "number", "minimum": -1.5, "maximum": 2.25})"), -1500,
                false, 2250, false);
  check_numbers(
      json::parse(R"({"type": "number", "exclusiveMinimum": -1.5, "exclusiveMaximum": 2.25})"),
      -1500, true, 2250, true);
  check_numbers(json::parse(R"({"type": "number", "maximum": -0.125})"), -kInf, false, -125, false);
  check_numbers(json::parse(R"({"type": "number", "minimum": 0.3, "exclusiveMaximum": 1})"), 300,
                false, 1000, true);
  check_numbers(json::parse(R"({"type": "number", "minimum": -2, "maximum": -2})"), -2000, false,
                -2000, false);
  check_numbers(json::parse(R"({"type": "number", "exclusiveMaximum": 0})"), -kInf, false, 0, true);
  // Bounds finer than 16 decimals round to the nearest representable number inside.
  check(json::parse(R"({"type": "number", "minimum": 0.12345678901234567})"),
        {"0.1234567890123457", "1"}, {"0.1234567890123456", "0.12"});
  check(json::parse(R"({"type": "number", "minimum": 0})"), {"0.5"}, {"1e3", "-1"});
  EXPECT_NE(error_of(json::parse(R"({"type": "number", "minimum": 2, "exclusiveMaximum": 2})")),
            "");
}

TEST(JsonSchemaTest, Nullable) {
  check(json::parse(R"({"type": "integer", "nullable": true})"), {"1", "null"}, {"\"1\""});
  check(json::parse(R"({"type": "integer", "nullable": false})"), {"1"}, {"null"});
  check(
      json::parse(R"({"$defs": {"A": {"type": "string"}}, "$ref": "#/$defs/A", "nullable": true})"),
      {"\"a\"", "null"}, {"1"});
}

TEST(JsonSchemaTest, RefsAndRecursion) {
  const json tree = json::parse(R"({
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://example.com/tree",
    "$defs": {"node": {"type": "object",
                       "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                                      "value": {"type": "integer"}},
                       "required": ["value"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})");
  check(
      tree,
      {R"({"value":1})", R"({"children":[],"value":1})",
       R"({"children":[{"value":2},{"children":[{"children":[],"value":4}],"value":3}],"value":1})"},
      {R"({"children":[{}],"value":1})", R"({"children":[{"value":"x"}],"value":1})", "{}"});
  // "#" is the whole schema; "definitions" works like "$defs".
  check(
      json::parse(
          R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
                        "required": ["next"], "additionalProperties": false})"),
      {R"({"next":null})", R"({"next":{"next":{"next":null}}})"}, {R"({"next":{}})"});
  check(json::parse(R"({"definitions": {"Pos": {"type": "integer", "minimum": 1}},
                        "type": "array", "items": {"$ref": "#/definitions/Pos"}})"),
        {"[1,2]"}, {"[0]"});
  // A $ref with siblings: both apply.
  check(json::parse(R"({"$defs": {"S": {"type": "string"}}, "$ref": "#/$defs/S", "maxLength": 1})"),
        {"\"a\""}, {"\"ab\"", "1"});
}

TEST(JsonSchemaTest, BadRefsAreNamed) {
  std::string e = error_of(json::parse(R"({"properties": {"a": {"$ref": "#/$defs/Missing"}}})"));
  EXPECT_NE(e.find("#/$defs/Missing"), std::string::npos) << e;
  EXPECT_NE(e.find("/properties/a"), std::string::npos) << e;
  e = error_of(json::parse(R"({"$ref": "https://example.com/other.json"})"));
  EXPECT_NE(e.find("https://example.com/other.json"), std::string::npos) << e;
  e = error_of(json::parse(R"({"$ref": 3})"));
  EXPECT_NE(e.find("$ref"), std::string::npos) << e;
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreNamedWithTheirPlace) {
  const std::vector<std::string> keywords = {"not",
                                             "if",
                                             "then",
                                             "else",
                                             "patternProperties",
                                             "dependentRequired",
                                             "uniqueItems",
                                             "multipleOf",
                                             "minProperties",
                                             "maxProperties",
                                             "propertyNames",
                                             "contains",
                                             "unevaluatedProperties",
                                             "dependentSchemas",
                                             "$dynamicRef"};
  for (const std::string& k : keywords) {
    const json schema = {{"type", "object"}, {"properties", {{"tags", {{k, true}}}}}};
    EXPECT_EQ(error_of(schema),
              "the JSON Schema keyword '" + k + "' at /properties/tags is not supported");
  }
  EXPECT_EQ(error_of(json::parse(R"({"items": {"anyOf": [{"minContains": 1}]}})")),
            "the JSON Schema keyword 'minContains' at /items/anyOf/0 is not supported");
  EXPECT_EQ(error_of(json::parse(R"({"uniqueItems": true})")),
            "the JSON Schema keyword 'uniqueItems' at / is not supported");
}

TEST(JsonSchemaTest, OtherErrors) {
  EXPECT_NE(error_of(json::parse(R"({"type": "strin"})")).find("'strin'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"type": 3})")).find("'type'"), std::string::npos);
  EXPECT_NE(error_of(json(false)).find("false"), std::string::npos);
  EXPECT_NE(error_of(json(3)).find("must be an object"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"minLength": "3"})")).find("'minLength'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"maxItems": 20000})")).find("'maxItems'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"enum": []})")).find("'enum'"), std::string::npos);
  EXPECT_NE(error_of(json::parse(R"({"pattern": "a", "maxLength": 3})")).find("'pattern'"),
            std::string::npos);
}

TEST(JsonSchemaTest, FiftyProperties) {
  json schema = {{"type", "object"}, {"additionalProperties", false}};
  json doc = json::object();
  for (int i = 0; i < 50; ++i) {
    const std::string key = fmt::format("field_{}", 100 + i);
    const char* type = i % 3 == 0 ? "string" : i % 3 == 1 ? "integer" : "boolean";
    schema["properties"][key] = {{"type", type}, {"description", fmt::format("field {}", i)}};
    if (i % 2 == 0) schema["required"].push_back(key);
    doc[key] = i % 3 == 0 ? json("v") : i % 3 == 1 ? json(i) : json(true);
  }
  auto g = compile_schema(schema);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(doc.dump()));
  EXPECT_TRUE(g->accepts(doc.dump(2)));
  json fewer = doc;
  fewer.erase("field_101");  // optional
  EXPECT_TRUE(g->accepts(fewer.dump()));
  fewer.erase("field_100");  // required
  EXPECT_FALSE(g->accepts(fewer.dump()));
}

TEST(JsonSchemaTest, AllOptionalPropertiesStayLinear) {
  json schema = {{"type", "object"}};
  for (int i = 0; i < 40; ++i) {
    schema["properties"][fmt::format("p{}", 100 + i)] = {{"type", "integer"}};
  }
  auto gbnf = json_schema_to_gbnf(schema);
  ASSERT_TRUE(gbnf.has_value());
  EXPECT_LT(gbnf->size(), 20000u);  // a rule per start, not a copy of the tail per start
  auto g = compile_text(*gbnf);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(R"({"p105":1,"p139":2,"extra":"x"})"));
  EXPECT_FALSE(g->accepts(R"({"p139":2,"p105":1})"));
}

TEST(JsonSchemaTest, PrefixedRulesEmbed) {
  const json a = json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}},
                                 "required": ["city"], "additionalProperties": false})");
  const json b =
      json::parse(R"({"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}},
                                 "required": ["n"]})");
  auto ra = json_schema_rules(a, "fn1-args");
  auto rb = json_schema_rules(b, "fn2-args");
  ASSERT_TRUE(ra.has_value()) << ra.status().message();
  ASSERT_TRUE(rb.has_value()) << rb.status().message();
  for (const std::string* text : {&*ra, &*rb}) {
    auto rules = parse_gbnf(*text);
    ASSERT_TRUE(rules.has_value()) << rules.status().message();
    const std::string prefix = text == &*ra ? "fn1-args" : "fn2-args";
    EXPECT_EQ((*rules)[0].name, prefix);
    for (const GbnfRule& r : *rules) {
      EXPECT_EQ(r.name.rfind(prefix, 0), 0u) << r.name;
      EXPECT_NE(r.name, "root");
    }
  }
  auto g = compile_text("root ::= fn1-args | fn2-args\n" + *ra + *rb);
  ASSERT_NE(g, nullptr);
  EXPECT_TRUE(g->accepts(R"({"city":"Paris"})"));
  EXPECT_TRUE(g->accepts(R"({"n":3,"more":[1]})"));
  EXPECT_FALSE(g->accepts(R"({"n":-3})"));
  EXPECT_FALSE(g->accepts(R"({"city":"Paris","n":3})"));
  // The same schema twice under two prefixes does not clash either.
  auto ra2 = json_schema_rules(a, "fn3");
  ASSERT_TRUE(ra2.has_value());
  EXPECT_NE(compile_text("root ::= fn1-args | fn3\n" + *ra + *ra2), nullptr);
  EXPECT_FALSE(json_schema_rules(a, "").has_value());
  EXPECT_FALSE(json_schema_rules(a, "bad name").has_value());
}

TEST(JsonSchemaTest, JsonObjectGrammar) {
  auto g = compile_text(json_object_gbnf());
  ASSERT_NE(g, nullptr);
  for (const char* good :
       {"{}", R"({"a":1})", R"({"a": {"b": [1, 2.5, "x", null, true]}, "c": {}})"}) {
    EXPECT_TRUE(g->accepts(good)) << good;
  }
  for (const char* bad : {"[]", "\"s\"", "1", "{", R"({"a":})", R"({a:1})", " {}"}) {
    EXPECT_FALSE(g->accepts(bad)) << bad;
  }
  EXPECT_TRUE(g->accepts_prefix("{\"a\": [1, "));
}

TEST(JsonSchemaTest, PropertyNamesNeedingEscapes) {
  check(json::parse(
            R"({"properties": {"a b": {}, "q\"uote": {}, "\u00e9": {}, "root": {}, "string": {}},
                        "additionalProperties": false})"),
        {R"({"a b":1})", R"({"q\"uote":1})", "{\"\xC3\xA9\":1}", R"({"root":1,"string":"s"})"},
        {R"({"ab":1})", R"({"q"uote":1})"});
}

}  // namespace
}  // namespace ponder::grammar

namespace ponder::grammar {
namespace {

TEST(JsonSchemaTest, PatternNestingIsBounded) {
  const std::string deep = std::string(5000, '(') + "a" + std::string(5000, ')');
  auto g = json_schema_to_gbnf(nlohmann::json{{"type", "string"}, {"pattern", deep}});
  ASSERT_FALSE(g.has_value());
  EXPECT_NE(g.status().message().find("nested deeper than 100"), std::string::npos)
      << g.status().message();
  EXPECT_TRUE(json_schema_to_gbnf(nlohmann::json{{"type", "string"}, {"pattern", "((a|b)c)+"}})
                  .has_value());
}

}  // namespace
}  // namespace ponder::grammar
