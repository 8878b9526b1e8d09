// JSON Schema -> GBNF. One Converter walks the schema and writes one rule per named thing (the
// value, each property's value, each $ref target, each helper); a small schema's value is often
// a single helper and gets no rule of its own.
//
// What the grammar generates, in short:
// - Whitespace: `space ::= ( " " | "\n" [ \t]{0,20} )?`, one optional separator after `{` `[`
//   `,` `:` and before `}` `]`, none around the whole value: a model cannot pad forever.
// - Objects: the properties in the order the schema's object holds them (required ones
//   mandatory, the others optional), then, when additionalProperties is not false, optional
//   extra `"key": value` pairs whose keys differ from the declared ones (keys that need a JSON
//   escape or longer than 64 bytes are not excluded). allOf merges: union of properties and
//   required, false additionalProperties wins.
// - Strings: any character but `"` `\` and controls, or an escape; minLength / maxLength count
//   characters (an escape is one). `pattern` is anchored at both ends (the whole string must
//   match: a generator should not add text around the match) and is ECMAScript's subset of
//   literals, escapes (\d \w \s \D \W \S \n \t \xHH \uHHHH ...), classes, `.`, groups ( ) (?: )
//   (?<name> ) with `|`, quantifiers * + ? {m} {m,} {m,n} (lazy ones alike), ^ at the start and
//   $ at the end; lookarounds, backreferences, \b and \p{...} are errors. A pattern's characters
//   are written as their canonical JSON escapes (`"` as \", a newline as \n).
// - Numbers: JSON's grammar with at most 16 integer digits, 16 fraction digits and a 3 digit
//   exponent. With bounds (minimum, maximum, exclusive*), the grammar is exact and written
//   without an exponent; integers the same, with no fraction.
// - Enum and const values are literals of their compact JSON (no whitespace inside).
#include "grammar/json_schema.h"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/utf8_ranges.h"

namespace ponder::grammar {
namespace {

using Json = nlohmann::ordered_json;
using Alts = std::vector<std::string>;  // alternatives, each a sequence of GBNF elements

constexpr int kMaxDepth = 64;       // nesting of schemas (and of $ref chains while merging)
constexpr int kMaxFracDigits = 16;  // digits after the point
constexpr uint64_t kIntCap = 9999999999999999ULL;  // the largest 16-digit integer part
constexpr const char* kQuote = R"("\"")";
// A JSON escape; \u names a code point: a UTF-16 unit that is no surrogate, or a high surrogate
// and its low one (a lone surrogate is valid JSON text that strict parsers reject, nlohmann's).
constexpr const char* kEscape =
    R"("\\" ( ["\\/bfnrt] | "u" ( [0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | )"
    R"([dD] [89abAB] [0-9a-fA-F]{2} "\\u" [dD] [c-fC-F] [0-9a-fA-F]{2} ) ))";

const std::set<std::string> kIgnored = {
    "description", "title",      "$schema",  "$id",       "default", "examples",   "example",
    "$comment",    "deprecated", "readOnly", "writeOnly", "$defs",   "definitions"};
const std::set<std::string> kSupported = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "allOf",
                                          "items",
                                          "prefixItems",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "pattern",
                                          "format",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "nullable",
                                          "$ref",
                                          "additionalItems"};
const std::set<std::string> kTypes = {"string", "number", "integer", "boolean",
                                      "null",   "object", "array"};
const std::set<std::string> kStringFormats = {"date",  "time",     "date-time", "uuid",
                                              "email", "hostname", "ipv4",      "uri"};
// The helper rules, reserved so that no schema-derived rule takes their names.
const std::vector<std::string> kHelpers = {
    "space",    "char",           "string", "integer",    "number",    "boolean", "value",
    "object",   "array",          "date",   "time",       "date-time", "uuid",    "email",
    "hostname", "hostname-label", "ipv4",   "ipv4-octet", "uri"};

std::string dump(const Json& v) { return v.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string join(const Alts& parts, const char* sep) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

// A GBNF literal of UTF-8 `bytes`.
std::string lit(std::string_view bytes) {
  std::string out = "\"";
  for (const char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7F) {
      out += fmt::format("\\x{:02X}", c);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// One code point inside a GBNF class.
std::string class_char(uint32_t cp) {
  if ((cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) {
    return std::string(1, static_cast<char>(cp));
  }
  if (cp < 0x100) return fmt::format("\\x{:02X}", cp);
  if (cp < 0x10000) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

// True when `s` is one GBNF element: a name, literal, class or ( group ), maybe with a postfix.
bool is_one_element(const std::string& s) {
  int depth = 0;
  bool in_lit = false, in_class = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in_lit || in_class) {
      if (c == '\\') {
        ++i;
      } else if ((in_lit && c == '"') || (in_class && c == ']')) {
        in_lit = in_class = false;
      }
    } else if (c == '"') {
      in_lit = true;
    } else if (c == '[') {
      in_class = true;
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if ((c == ' ' || c == '|') && depth == 0) {
      return false;
    }
  }
  return !s.empty();
}

std::string seq(std::initializer_list<std::string> parts) { return join(Alts(parts), " "); }

// `elem` repeated min..max times (max -1: unbounded).
std::string repeat(const std::string& elem, int64_t min, int64_t max) {
  if (max == 0 || elem.empty()) return "";
  if (min == 1 && max == 1) return elem;
  const char last = elem.back();
  const bool atom =
      is_one_element(elem) && last != '*' && last != '+' && last != '?' && last != '}';
  const std::string e = atom ? elem : "( " + elem + " )";
  if (min == 0 && max == 1) return e + "?";
  if (min == 0 && max < 0) return e + "*";
  if (min == 1 && max < 0) return e + "+";
  if (max < 0) return fmt::format("{}{{{},}}", e, min);
  if (min == max) return fmt::format("{}{{{}}}", e, min);
  return fmt::format("{}{{{},{}}}", e, min, max);
}

// Alternatives as one element: ( a | b ); an empty alternative makes it optional.
std::string element(const Alts& alts) {
  Alts nonempty;
  for (const std::string& a : alts) {
    if (!a.empty()) nonempty.push_back(a);
  }
  if (nonempty.empty()) return "";
  const std::string e = nonempty.size() == 1 && is_one_element(nonempty[0])
                            ? nonempty[0]
                            : "( " + join(nonempty, " | ") + " )";
  return nonempty.size() < alts.size() ? repeat(e, 0, 1) : e;
}

// Alternatives to put in a sequence: one alternative needs no ( ).
std::string inline_alts(const Alts& alts) { return alts.size() == 1 ? alts[0] : element(alts); }

std::string pointer_token(const std::string& key) {
  std::string out;
  for (const char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

std::string where(const std::string& path) { return path.empty() ? "/" : path; }

std::string type_name(const Json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  return "an object";
}

// ---- code point sets and the JSON encoding of their characters (for `pattern`) ----

using CpSet = std::vector<CodeRange>;

CpSet normalize(CpSet r, bool negated) { return normalize_code_ranges(std::move(r), negated); }

bool contains(const CpSet& set, uint32_t cp) {
  for (const CodeRange& r : set) {
    if (cp >= r.lo && cp <= r.hi) return true;
  }
  return false;
}

// The canonical JSON text of a character that must be escaped (`"`, `\`, controls).
std::string escaped(uint32_t cp) {
  switch (cp) {
    case '"':
      return lit("\\\"");
    case '\\':
      return lit("\\\\");
    case '\b':
      return lit("\\b");
    case '\f':
      return lit("\\f");
    case '\n':
      return lit("\\n");
    case '\r':
      return lit("\\r");
    case '\t':
      return lit("\\t");
    default:
      break;
  }
  const std::string hex = fmt::format("{:02x}", cp);
  const char low = hex[1];
  if (low >= 'a') {
    return seq({lit("\\u00" + hex.substr(0, 1)), fmt::format("[{}{}]", low, char(low - 32))});
  }
  return lit("\\u00" + hex);
}

// One element matching the JSON text of any character of `set` (non-empty, normalized).
std::string json_chars(const CpSet& set) {
  Alts alts;
  std::string plain;
  for (const CodeRange& r : set) {
    uint32_t lo = std::max<uint32_t>(r.lo, 0x20);
    while (lo <= r.hi) {  // split around '"' and '\'
      uint32_t hi = r.hi;
      if (lo <= '"' && hi >= '"') hi = lo == '"' ? lo : '"' - 1;
      if (lo <= '\\' && hi >= '\\') hi = lo == '\\' ? lo : '\\' - 1;
      if (lo != '"' && lo != '\\') {
        plain += class_char(lo);
        if (hi > lo) plain.append("-").append(class_char(hi));
      }
      lo = hi + 1;
    }
  }
  if (!plain.empty()) alts.push_back("[" + plain + "]");
  if (contains(set, '"')) alts.push_back(escaped('"'));
  if (contains(set, '\\')) alts.push_back(escaped('\\'));
  bool all_controls = true;
  for (uint32_t cp = 0; cp < 0x20; ++cp) all_controls = all_controls && contains(set, cp);
  if (all_controls) {
    alts.push_back(R"("\\" ( [bfnrt] | "u00" ( "0" [0-7bBeEfF] | "1" [0-9a-fA-F] ) ))");
  } else {
    for (uint32_t cp = 0; cp < 0x20; ++cp) {
      if (contains(set, cp)) alts.push_back(escaped(cp));
    }
  }
  return element(alts);
}

// ---- ECMAScript `pattern` -> GBNF over the string's JSON text ----

class RegexConverter {
 public:
  RegexConverter(std::string_view p, std::string path) : p_(p), path_(std::move(path)) {}
  static constexpr int kMaxGroupDepth = 100;
  int group_depth_ = 0;

  // The string's contents (between the quotes); an error names `pattern` and where it is.
  Expected<std::string> convert() {
    const Alts alts = alternation(true);
    if (error_.empty() && pos_ < p_.size()) fail("unbalanced ')'");
    if (!error_.empty()) return Status::error(error_);
    return inline_alts(alts);
  }

 private:
  struct Atom {
    std::string elem;     // a GBNF element ("" matches the empty string)
    std::string literal;  // the JSON text of a single character when it is one fixed string
  };

  template <typename T = void>
  T fail(const std::string& what) {
    if (error_.empty()) {
      error_ =
          fmt::format("'pattern' at {} (\"{}\"): {} at offset {}", where(path_), p_, what, pos_);
    }
    return T();
  }
  bool at(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  bool at(std::string_view s) const { return p_.substr(pos_, s.size()) == s; }

  Alts alternation(bool top) {
    Alts alts;
    alts.push_back(sequence(top));
    while (error_.empty() && at('|')) {
      ++pos_;
      alts.push_back(sequence(top));
    }
    return alts;
  }

  std::string sequence(bool top) {
    std::vector<std::string> elems;
    std::string pending;  // JSON text of consecutive single characters
    auto flush = [&] {
      if (!pending.empty()) elems.push_back(lit(pending));
      pending.clear();
    };
    if (top && at('^')) ++pos_;
    while (error_.empty() && pos_ < p_.size() && !at('|') && !at(')')) {
      if (at('$')) {
        ++pos_;
        if (top && (pos_ == p_.size() || at('|'))) continue;
        return fail<std::string>("'$' is only supported at the end");
      }
      if (at('^')) return fail<std::string>("'^' is only supported at the start");
      const Atom a = atom();
      if (!error_.empty()) return "";
      int64_t min = 1, max = 1;
      const bool quantified = quantifier(&min, &max);
      if (!error_.empty()) return "";
      if (!quantified && !a.literal.empty()) {
        pending += a.literal;
        continue;
      }
      flush();
      const std::string e = repeat(a.elem, min, max);
      if (!e.empty()) elems.push_back(e);
    }
    flush();
    return join(elems, " ");
  }

  bool quantifier(int64_t* min, int64_t* max) {
    if (pos_ >= p_.size()) return false;
    const char c = p_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      *min = c == '+' ? 1 : 0;
      *max = c == '?' ? 1 : -1;
    } else if (!braces(min, max)) {
      return false;
    }
    if (at('?')) ++pos_;  // lazy: the same strings
    if (*max > kMaxRepetition || *min > kMaxRepetition) {
      fail(fmt::format("repetition bounds above {} are not supported", kMaxRepetition));
    } else if (*max >= 0 && *max < *min) {
      fail("the repetition's maximum is below its minimum");
    }
    return true;
  }

  // {m} {m,} {m,n}; false (and nothing consumed) when the text is not one.
  bool braces(int64_t* min, int64_t* max) {
    if (!at('{')) return false;
    size_t i = pos_ + 1;
    auto number = [&](int64_t* out) {
      const size_t start = i;
      int64_t v = 0;
      while (i < p_.size() && p_[i] >= '0' && p_[i] <= '9' && i - start < 9) {
        v = v * 10 + (p_[i++] - '0');
      }
      *out = v;
      return i > start;
    };
    int64_t m = 0, n = 0;
    if (!number(&m)) return false;
    n = m;
    if (i < p_.size() && p_[i] == ',') {
      ++i;
      if (!number(&n)) n = -1;
    }
    if (i >= p_.size() || p_[i] != '}') return false;
    pos_ = i + 1;
    *min = m;
    *max = n;
    return true;
  }

  Atom atom() {
    const char c = p_[pos_];
    if (c == '(') return group();
    if (c == '[') return set_atom(char_class());
    if (c == '.') {
      ++pos_;
      return set_atom(normalize({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true));
    }
    int64_t m = 0, n = 0;
    if (c == '*' || c == '+' || c == '?' || braces(&m, &n)) return fail<Atom>("nothing to repeat");
    CpSet set;
    uint32_t cp = 0;
    if (c == '\\') {
      if (!escape(false, &cp, &set)) return Atom{};
      if (!set.empty()) return set_atom(set);
    } else {
      cp = utf8();
    }
    return set_atom({{cp, cp}});
  }

  Atom set_atom(const CpSet& raw) {
    const CpSet set = normalize(raw, false);
    if (set.empty()) return fail<Atom>("a class that matches no character");
    Atom a;
    a.elem = json_chars(set);
    if (set.size() == 1 && set[0].lo == set[0].hi) {  // one character: its JSON text, if fixed
      const uint32_t cp = set[0].lo;
      if (cp >= 0x20 && cp != '"' && cp != '\\') {
        append_utf8(cp, &a.literal);
      } else {
        static const std::map<uint32_t, std::string> kShort = {
            {'"', "\\\""}, {'\\', "\\\\"}, {'\b', "\\b"}, {'\f', "\\f"},
            {'\n', "\\n"}, {'\r', "\\r"},  {'\t', "\\t"}};
        const auto it = kShort.find(cp);
        if (it != kShort.end()) a.literal = it->second;
      }
      if (!a.literal.empty()) a.elem = lit(a.literal);
    }
    return a;
  }

  Atom group() {
    ++pos_;  // (
    if (at("?:")) {
      pos_ += 2;
    } else if (at("?=") || at("?!") || at("?<=") || at("?<!")) {
      return fail<Atom>("lookarounds are not supported");
    } else if (at("?<")) {
      while (pos_ < p_.size() && p_[pos_] != '>') ++pos_;
      ++pos_;
    } else if (at('?')) {
      return fail<Atom>("'(?' groups other than (?: and (?<name> are not supported");
    }
    // Groups nest by recursion: bounded, so a request's pattern cannot overflow the stack.
    if (++group_depth_ > kMaxGroupDepth)
      return fail<Atom>(fmt::format("groups nested deeper than {}", kMaxGroupDepth));
    const Alts alts = alternation(false);
    --group_depth_;
    if (!error_.empty()) return Atom{};
    if (!at(')')) return fail<Atom>("missing ')'");
    ++pos_;
    Atom a;
    a.elem = element(alts);
    return a;
  }

  CpSet char_class() {
    ++pos_;  // [
    const bool negated = at('^');
    if (negated) ++pos_;
    CpSet set;
    while (error_.empty() && pos_ < p_.size() && !at(']')) {
      uint32_t lo = 0;
      CpSet sub;
      if (!class_atom(&lo, &sub)) return {};
      if (!sub.empty()) {
        set.insert(set.end(), sub.begin(), sub.end());
        continue;
      }
      uint32_t hi = lo;
      if (at('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        CpSet sub2;
        if (!class_atom(&hi, &sub2)) return {};
        if (!sub2.empty()) return fail<CpSet>("a range bounded by a class escape");
        if (hi < lo) return fail<CpSet>("a range out of order");
      }
      set.push_back({lo, hi});
    }
    if (!at(']')) return fail<CpSet>("missing ']'");
    ++pos_;
    return normalize(set, negated);
  }

  bool class_atom(uint32_t* cp, CpSet* set) {
    if (at('\\')) return escape(true, cp, set);
    *cp = utf8();
    return error_.empty();
  }

  // After a backslash: a character or (set non-empty) a class escape.
  bool escape(bool in_class, uint32_t* cp, CpSet* set) {
    ++pos_;
    if (pos_ >= p_.size()) return fail<bool>("a trailing '\\'");
    const char e = p_[pos_++];
    static const std::map<char, CpSet> kClasses = {
        {'d', {{'0', '9'}}},
        {'w', {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}},
        {'s',
         {{'\t', '\r'},
          {' ', ' '},
          {0xA0, 0xA0},
          {0x1680, 0x1680},
          {0x2000, 0x200A},
          {0x2028, 0x2029},
          {0x202F, 0x202F},
          {0x205F, 0x205F},
          {0x3000, 0x3000},
          {0xFEFF, 0xFEFF}}}};
    static const std::map<char, uint32_t> kChars = {{'n', '\n'}, {'r', '\r'}, {'t', '\t'},
                                                    {'f', '\f'}, {'v', '\v'}, {'0', 0}};
    static const std::map<char, const char*> kRefused = {
        {'b', "word boundaries (\\b)"},
        {'B', "word boundaries (\\B)"},
        {'k', "backreferences (\\k<name>)"},
        {'p', "Unicode property escapes (\\p{...})"},
        {'P', "Unicode property escapes (\\P{...})"}};
    if (const auto it = kClasses.find(static_cast<char>(e | 0x20)); it != kClasses.end()) {
      *set = e == it->first ? it->second : normalize(it->second, true);  // \D \W \S: complements
      return true;
    }
    if (const auto it = kChars.find(e); it != kChars.end()) return *cp = it->second, true;
    if (e == 'b' && in_class) return *cp = '\b', true;
    if (const auto it = kRefused.find(e); it != kRefused.end()) {
      return fail<bool>(std::string(it->second) + " are not supported");
    }
    if (e >= '1' && e <= '9') return fail<bool>("backreferences are not supported");
    if (e == 'c') {
      if (pos_ < p_.size() && (p_[pos_] | 0x20) >= 'a' && (p_[pos_] | 0x20) <= 'z') {
        *cp = static_cast<uint32_t>(p_[pos_++]) % 32;
        return true;
      }
      return fail<bool>("'\\c' without a letter");
    }
    if (e == 'x') return hex(2, cp);
    if (e != 'u') {
      --pos_;
      *cp = utf8();  // an identity escape: \. \\ \/ \- \( ...
      return error_.empty();
    }
    if (at('{')) {
      ++pos_;
      uint32_t v = 0;
      int n = 0;
      while (pos_ < p_.size() && p_[pos_] != '}' && n < 7) {
        uint32_t d = 0;
        if (!hex(1, &d)) return false;
        v = v * 16 + d;
        ++n;
      }
      if (!at('}') || n == 0 || v > 0x10FFFF) return fail<bool>("a bad \\u{...} escape");
      ++pos_;
      *cp = v;
      return true;
    }
    if (!hex(4, cp)) return false;
    if (*cp >= 0xD800 && *cp <= 0xDBFF && at("\\u")) {  // a surrogate pair
      const size_t save = pos_;
      pos_ += 2;
      uint32_t low = 0;
      if (hex(4, &low) && low >= 0xDC00 && low <= 0xDFFF) {
        *cp = 0x10000 + ((*cp - 0xD800) << 10) + (low - 0xDC00);
        return true;
      }
      pos_ = save;
      error_.clear();
    }
    if (*cp >= 0xD800 && *cp <= 0xDFFF) return fail<bool>("a lone surrogate escape");
    return true;
  }

  bool hex(int digits, uint32_t* out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      const char c = pos_ < p_.size() ? p_[pos_] : '\0';
      const int d = (c >= '0' && c <= '9')   ? c - '0'
                    : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                    : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                             : -1;
      if (d < 0) return fail<bool>("a bad hex escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    *out = v;
    return true;
  }

  uint32_t utf8() {
    const auto c = static_cast<unsigned char>(p_[pos_]);
    const int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > p_.size()) return fail<uint32_t>("invalid UTF-8");
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const auto b = static_cast<unsigned char>(p_[pos_ + static_cast<size_t>(i)]);
      if ((b >> 6) != 2) return fail<uint32_t>("invalid UTF-8");
      v = (v << 6) | (b & 0x3F);
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return fail<uint32_t>("invalid UTF-8");
    pos_ += static_cast<size_t>(n);
    return v;
  }

  std::string_view p_;
  std::string path_;
  size_t pos_ = 0;
  std::string error_;
};

// ---- exact integer and decimal ranges ----

uint64_t pow10(int n) {
  uint64_t v = 1;
  for (int i = 0; i < n; ++i) v *= 10;
  return v;
}

std::string digit_class(int lo, int hi) {
  return lo == hi ? lit(std::to_string(lo)) : fmt::format("[{}-{}]", lo, hi);
}

// Same-length digit strings in [x, y] (leading zeros allowed inside).
Alts same_length(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  if (n == 0) return {""};
  if (x == y) return {lit(x)};
  const int dx = x[0] - '0', dy = y[0] - '0';
  const std::string xr = x.substr(1), yr = y.substr(1);
  if (dx == dy) return {seq({lit(x.substr(0, 1)), element(same_length(xr, yr))})};
  const bool lo_full = xr == std::string(n - 1, '0'), hi_full = yr == std::string(n - 1, '9');
  const std::string any = repeat("[0-9]", static_cast<int64_t>(n - 1), static_cast<int64_t>(n - 1));
  Alts alts;
  if (!lo_full) {
    alts.push_back(seq({digit_class(dx, dx), element(same_length(xr, std::string(n - 1, '9')))}));
  }
  const int start = lo_full ? dx : dx + 1, end = hi_full ? dy : dy - 1;
  if (start <= end) alts.push_back(seq({digit_class(start, end), any}));
  if (!hi_full) {
    alts.push_back(seq({digit_class(dy, dy), element(same_length(std::string(n - 1, '0'), yr))}));
  }
  return alts;
}

// Integers in [a, b] written without leading zeros (0 <= a <= b <= kIntCap).
Alts uint_range(uint64_t a, uint64_t b) {
  Alts alts;
  const int la = static_cast<int>(std::to_string(a).size()),
            lb = static_cast<int>(std::to_string(b).size());
  int run = 0;  // first length of a run of complete lengths (>= 2 digits)
  auto flush = [&](int last) {
    if (run > 0) alts.push_back(seq({"[1-9]", repeat("[0-9]", run - 1, last - 1)}));
    run = 0;
  };
  for (int len = la; len <= lb; ++len) {
    const uint64_t first = len == 1 ? 0 : pow10(len - 1), last = pow10(len) - 1;
    const uint64_t lo = std::max(a, first), hi = std::min(b, last);
    if (len >= 2 && lo == first && hi == last) {
      if (run == 0) run = len;
      continue;
    }
    flush(len - 1);
    const std::string xs = std::to_string(lo), ys = std::to_string(hi);
    for (std::string& s : same_length(xs, ys)) alts.push_back(std::move(s));
  }
  flush(lb);
  return alts;
}

// A bound's magnitude as decimal digits: ip.fp, huge when ip has more than 16 digits.
struct Dec {
  bool neg = false;
  bool huge = false;
  uint64_t ip = 0;
  std::string fp;  // no trailing zeros
};

std::optional<Dec> parse_dec(const Json& v) {
  const std::string t = dump(v);  // "12", "-0.5", "1e+20", "1.5e-07"
  Dec d;
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && t[i] == '-') neg = true, ++i;
  std::string digits;
  int64_t point = -1;
  for (; i < t.size() && ((t[i] >= '0' && t[i] <= '9') || t[i] == '.'); ++i) {
    if (t[i] == '.') {
      point = static_cast<int64_t>(digits.size());
    } else {
      digits += t[i];
    }
  }
  if (point < 0) point = static_cast<int64_t>(digits.size());
  if (i < t.size() && (t[i] == 'e' || t[i] == 'E')) point += std::stoll(t.substr(i + 1));
  if (point > 400 || point < -400) return std::nullopt;
  if (point < 0) digits.insert(0, static_cast<size_t>(-point), '0'), point = 0;
  if (point > static_cast<int64_t>(digits.size())) {
    digits.append(static_cast<size_t>(point) - digits.size(), '0');
  }
  std::string ip = digits.substr(0, static_cast<size_t>(point));
  d.fp = digits.substr(static_cast<size_t>(point));
  while (!d.fp.empty() && d.fp.back() == '0') d.fp.pop_back();
  ip.erase(0, std::min(ip.find_first_not_of('0'), ip.size()));
  if (ip.size() > 16) {
    d.huge = true;
  } else {
    d.ip = ip.empty() ? 0 : std::stoull(ip);
  }
  d.neg = neg && (d.huge || d.ip != 0 || !d.fp.empty());
  return d;
}

// A bound with more fraction digits than a number may have, rounded to the nearest one that a
// number may have on its side (up: towards +infinity): the same numbers pass it.
void round_bound(Dec* d, bool* strict, bool up) {
  if (d->fp.size() <= static_cast<size_t>(kMaxFracDigits)) return;
  d->fp.resize(kMaxFracDigits);
  *strict = false;
  if (up != d->neg) {  // away from zero: add one unit of the last digit
    int i = kMaxFracDigits - 1;
    for (; i >= 0 && d->fp[static_cast<size_t>(i)] == '9'; --i) d->fp[static_cast<size_t>(i)] = '0';
    if (i >= 0) {
      ++d->fp[static_cast<size_t>(i)];
    } else if (++d->ip > kIntCap) {
      d->huge = true;
    }
  }
  while (!d->fp.empty() && d->fp.back() == '0') d->fp.pop_back();
  if (d->ip == 0 && d->fp.empty()) d->neg = false;
}

// Magnitude comparison (huge values compare equal among themselves).
int compare_mag(const Dec& a, const Dec& b) {
  if (a.huge != b.huge) return a.huge ? 1 : -1;
  if (a.ip != b.ip) return a.ip < b.ip ? -1 : 1;
  return a.fp == b.fp ? 0 : a.fp < b.fp ? -1 : 1;
}

int compare(const Dec& a, const Dec& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  return a.neg ? -compare_mag(a, b) : compare_mag(a, b);
}

struct Bound {
  Dec d;
  bool strict = false;
};

struct FracBound {
  std::string digits;
  bool strict = false;
};

struct Frac {
  bool empty_ok = false;  // no fraction at all satisfies the bounds
  Alts alts;              // fractions of 1..n digits, each starting with a digit
  bool possible() const { return empty_ok || !alts.empty(); }
};

bool is_true(const Json& s, const char* key) {
  const auto it = s.find(key);
  return it != s.end() && it->is_boolean() && it->get<bool>();
}

bool all_zero(const std::string& s) { return s.find_first_not_of('0') == std::string::npos; }

// Fraction digit strings D (0.D as a number) of at most n digits with lo <=/< 0.D <=/< hi.
Frac fraction(std::optional<FracBound> lo, std::optional<FracBound> hi, int n) {
  if (lo && !lo->strict && all_zero(lo->digits)) lo.reset();
  Frac f;
  f.empty_ok = !lo && (!hi || !all_zero(hi->digits) || !hi->strict);
  if (n == 0) return f;
  if (!lo && !hi) return f.alts = {repeat("[0-9]", 1, n)}, f;
  if (!lo && all_zero(hi->digits)) {  // D <= 0: zeros only (D < 0: nothing)
    if (!hi->strict) f.alts = {repeat(lit("0"), 1, n)};
    return f;
  }
  const int l0 = lo ? (lo->digits.empty() ? 0 : lo->digits[0] - '0') : -1;
  const int h0 = hi ? (hi->digits.empty() ? 0 : hi->digits[0] - '0') : 10;
  auto rest = [](const std::optional<FracBound>& b) {
    return FracBound{b->digits.empty() ? "" : b->digits.substr(1), b->strict};
  };
  int d = std::max(l0, 0);
  while (d <= std::min(h0, 9)) {
    const bool lo_eq = d == l0, hi_eq = d == h0;
    int d2 = d;  // the digits after d with the same bounds
    while (!lo_eq && !hi_eq && d2 + 1 < h0 && d2 + 1 <= 9) ++d2;
    std::string tail;
    if (!lo_eq && !hi_eq) {
      tail = repeat("[0-9]", 0, n - 1);
    } else {
      const Frac sub = fraction(lo_eq ? std::optional(rest(lo)) : std::nullopt,
                                hi_eq ? std::optional(rest(hi)) : std::nullopt, n - 1);
      if (!sub.possible()) {
        d = d2 + 1;
        continue;
      }
      if (!sub.alts.empty()) {
        tail = sub.empty_ok ? repeat(element(sub.alts), 0, 1) : element(sub.alts);
      }
    }
    f.alts.push_back(seq({digit_class(d, d2), tail}));
    d = d2 + 1;
  }
  return f;
}

// The optional "." fraction; nullopt when no fraction satisfies.
std::optional<std::string> fraction_text(const Frac& f) {
  if (!f.possible()) return std::nullopt;
  if (f.alts.empty()) return std::string();
  const std::string inner = seq({lit("."), element(f.alts)});
  return f.empty_ok ? "( " + inner + " )?" : inner;
}

// Non-negative decimals (no exponent) between lo and hi (none: 0 inclusive / 16 digits).
Alts magnitude_range(std::optional<Bound> lo, std::optional<Bound> hi) {
  if (lo && lo->d.huge) return {};
  if (hi && hi->d.huge) hi.reset();
  const uint64_t li = lo ? lo->d.ip : 0, ui = hi ? hi->d.ip : kIntCap;
  if (li > ui) return {};
  std::optional<FracBound> lo_frac, hi_frac;
  if (lo && !(lo->d.fp.empty() && !lo->strict)) lo_frac = FracBound{lo->d.fp, lo->strict};
  if (hi) hi_frac = FracBound{hi->d.fp, hi->strict};
  Alts alts;
  if (li == ui) {
    const auto f = fraction_text(fraction(lo_frac, hi_frac, kMaxFracDigits));
    if (f) alts.push_back(seq({lit(std::to_string(li)), *f}));
    return alts;
  }
  if (lo_frac) {
    const auto f = fraction_text(fraction(lo_frac, std::nullopt, kMaxFracDigits));
    if (f) alts.push_back(seq({lit(std::to_string(li)), *f}));
  }
  const uint64_t int_lo = lo_frac ? li + 1 : li, int_hi = hi_frac ? ui - 1 : ui;
  if (int_lo <= int_hi) {
    alts.push_back(seq({element(uint_range(int_lo, int_hi)), "( \".\" [0-9]{1,16} )?"}));
  }
  if (hi_frac) {
    const auto f = fraction_text(fraction(std::nullopt, hi_frac, kMaxFracDigits));
    if (f) alts.push_back(seq({lit(std::to_string(ui)), *f}));
  }
  return alts;
}

// ---- the converter ----

class Converter {
 public:
  Converter(const Json& root, std::string prefix) : root_(root), prefix_(std::move(prefix)) {
    root_name_ = prefix_.empty() ? "root" : prefix_;
    names_.insert(root_name_);
    for (const std::string& h : kHelpers) names_.insert(p(h));
    ref_names_["#"] = root_name_;
  }

  Expected<std::string> run() {
    const size_t slot = reserve(root_name_);
    const Alts alts = visit(root_, root_name_, "", 0);
    if (!status_.is_ok()) return status_;
    rules_[slot].second = join(alts, " | ");
    std::string out;
    for (const auto& [name, body] : rules_) {
      if (!body.empty()) out += name + " ::= " + body + "\n";
    }
    return out;
  }

 private:
  std::string p(const std::string& name) const {
    return prefix_.empty() ? name : prefix_ + "-" + name;
  }
  std::string sp() { return helper("space"); }
  std::string sep() { return sp() + " \",\" " + sp(); }
  // The name of a part of `parent`'s value (the root's parts go without "root-").
  std::string child(const std::string& parent, const std::string& suffix) const {
    const bool digit = !suffix.empty() && suffix[0] >= '0' && suffix[0] <= '9';
    return parent == "root" && prefix_.empty() && !digit ? suffix : parent + "-" + suffix;
  }

  // Keeps the first error; returns an empty T for the caller to return.
  template <typename T = Alts>
  T fail(const std::string& message) {
    if (status_.is_ok()) status_ = Status::error(message);
    return T();
  }
  bool failed() const { return !status_.is_ok(); }

  // A free rule name like `want` (other characters than letters, digits, '-' become '-').
  std::string fresh(const std::string& want) {
    std::string base;
    for (const char c : want) {
      const bool ok =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      base += ok ? c : '-';
    }
    if (base.empty()) base = "x";
    std::string name = base;
    for (int i = 2; names_.count(name) != 0; ++i) name = base + "-" + std::to_string(i);
    names_.insert(name);
    return name;
  }
  size_t reserve(const std::string& name) {
    rules_.emplace_back(name, "");
    return rules_.size() - 1;
  }

  // A helper rule's name, defining it on first use.
  std::string helper(const std::string& h) {
    const std::string name = p(h);
    if (!defined_.insert(name).second) return name;
    const size_t slot = reserve(name);
    std::string body;
    const std::string hex = "[0-9a-fA-F]";
    const std::string two = R"(( [01] [0-9] | "2" [0-3] ))";
    if (h == "space") body = R"(( " " | "\n" [ \t]{0,20} )?)";
    if (h == "char") body = std::string(R"([^"\\\x00-\x1F] | )") + kEscape;
    if (h == "string") body = seq({kQuote, helper("char") + "*", kQuote});
    if (h == "integer") body = R"("-"? ( "0" | [1-9] [0-9]{0,15} ))";
    if (h == "number") {
      body = R"("-"? ( "0" | [1-9] [0-9]{0,15} ) ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?)";
    }
    if (h == "boolean") body = R"("true" | "false")";
    if (h == "value") {
      body = join({helper("object"), helper("array"), helper("string"), helper("number"),
                   helper("boolean"), lit("null")},
                  " | ");
    }
    if (h == "object") {
      const std::string kv = seq({helper("string"), sp(), lit(":"), sp(), helper("value")});
      body = seq({lit("{"), sp(), "(", kv, "(", sep(), kv, ")*", sp(), ")?", lit("}")});
    }
    if (h == "array") {
      body = seq({lit("["), sp(), "(", helper("value"), "(", sep(), helper("value"), ")*", sp(),
                  ")?", lit("]")});
    }
    if (h == "date") {
      body = R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [12] [0-9] | "3" [01] ))";
    }
    if (h == "time") {
      body = seq({two,
                  R"(":" [0-5] [0-9] ":" ( [0-5] [0-9] | "60" ) ( "." [0-9]{1,9} )? ( [zZ] | [-+])",
                  two, R"(":" [0-5] [0-9] ))"});
    }
    if (h == "date-time") body = seq({helper("date"), "[tT ]", helper("time")});
    if (h == "uuid") {
      body = fmt::format(R"({0}{{8}} "-" {0}{{4}} "-" {0}{{4}} "-" {0}{{4}} "-" {0}{{12}})", hex);
    }
    if (h == "hostname-label") body = R"([a-zA-Z0-9] ( [a-zA-Z0-9\x2D]{0,61} [a-zA-Z0-9] )?)";
    if (h == "hostname") {
      body = seq({helper("hostname-label"), "(", lit("."), helper("hostname-label"), ")*"});
    }
    if (h == "email") {
      const std::string atom = R"([a-zA-Z0-9!#$%&'*+/=?^_`{|}~\x2D]{1,64})";
      body = seq({atom, "(", lit("."), atom, ")*", lit("@"), helper("hostname-label"), "(",
                  lit("."), helper("hostname-label"), ")+"});
    }
    if (h == "ipv4-octet") {
      body = R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])";
    }
    if (h == "ipv4") {
      const std::string o = helper("ipv4-octet");
      body = join({o, lit("."), o, lit("."), o, lit("."), o}, " ");
    }
    if (h == "uri") {
      body = R"([a-zA-Z] [a-zA-Z0-9+.\x2D]* ":" [a-zA-Z0-9\x2D._~:/?#\x5B\x5D@!$&'()*+,;=%]+)";
    }
    rules_[slot].second = body;
    return name;
  }

  // An element for `s`: a rule named like `want` unless the value is one element already.
  std::string rule_for(const Json& s, const std::string& want, const std::string& path, int depth) {
    const std::string name = fresh(want);
    const size_t slot = reserve(name);
    const Alts alts = visit(s, name, path, depth);
    if (failed()) return "";
    if (alts.size() == 1 && is_one_element(alts[0])) {
      names_.erase(name);
      return alts[0];
    }
    rules_[slot].second = join(alts, " | ");
    return name;
  }

  Status check_keywords(const Json& s, const std::string& path) {
    for (const auto& [key, value] : s.items()) {
      const bool items_array =
          key == "additionalItems" && s.contains("items") && s["items"].is_array();
      if ((kSupported.count(key) == 0 || (key == "additionalItems" && !items_array)) &&
          kIgnored.count(key) == 0) {
        return Status::errorf("the JSON Schema keyword '{}' at {} is not supported", key,
                              where(path));
      }
    }
    return Status::ok();
  }

  // The schema `#/...` names, or nullptr.
  const Json* resolve(const std::string& ref) const {
    if (ref == "#") return &root_;
    if (ref.rfind("#/", 0) != 0) return nullptr;
    const Json* cur = &root_;
    size_t start = 2;
    while (cur != nullptr) {
      const size_t end = std::min(ref.find('/', start), ref.size());
      std::string token;
      for (size_t i = start; i < end; ++i) {
        if (ref[i] == '~' && i + 1 < end && (ref[i + 1] == '0' || ref[i + 1] == '1')) {
          token += ref[++i] == '0' ? '~' : '/';
        } else if (ref[i] == '%' && i + 2 < end &&
                   std::isxdigit(static_cast<unsigned char>(ref[i + 1])) &&
                   std::isxdigit(static_cast<unsigned char>(ref[i + 2]))) {
          token += static_cast<char>(std::stoi(ref.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          token += ref[i];
        }
      }
      if (cur->is_object()) {
        const auto it = cur->find(token);
        cur = it == cur->end() ? nullptr : &*it;
      } else if (cur->is_array() && !token.empty() &&
                 token.find_first_not_of("0123456789") == std::string::npos && token.size() < 9 &&
                 std::stoul(token) < cur->size()) {
        cur = &(*cur)[std::stoul(token)];
      } else {
        cur = nullptr;
      }
      if (end >= ref.size()) break;
      start = end + 1;
    }
    return cur;
  }

  const Json* resolve_ref(const Json& ref, const std::string& path) {
    if (!ref.is_string()) {
      return fail<const Json*>(fmt::format("'$ref' at {} must be a string", where(path)));
    }
    const Json* target = resolve(ref.get_ref<const std::string&>());
    if (target == nullptr) {
      fail(
          fmt::format("the $ref '{}' at {} does not resolve (supported: '#', '#/$defs/NAME', "
                      "'#/definitions/NAME' and other '#/...' pointers into this schema)",
                      ref.get_ref<const std::string&>(), where(path)));
    }
    return target;
  }

  // The rule of a $ref's target, made once (recursive schemas refer to it by name).
  std::string ref_rule(const Json& ref, const std::string& path, int depth) {
    const Json* target = resolve_ref(ref, path);
    if (target == nullptr) return "";
    const std::string& r = ref.get_ref<const std::string&>();
    const auto it = ref_names_.find(r);
    if (it != ref_names_.end()) return it->second;
    const std::string name = fresh(p(r.substr(r.rfind('/') + 1)));
    ref_names_[r] = name;
    const size_t slot = reserve(name);
    const Alts alts = visit(*target, name, r.substr(1), depth);
    rules_[slot].second = join(alts, " | ");
    return name;
  }

  static bool only_annotations(const Json& s, std::initializer_list<const char*> also) {
    for (const auto& item : s.items()) {
      const std::string& key = item.key();  // (clang 14 cannot capture a structured binding)
      if (kIgnored.count(key) == 0 && std::find_if(also.begin(), also.end(), [&](const char* k) {
                                        return key == k;
                                      }) == also.end()) {
        return false;
      }
    }
    return true;
  }

  // `s` without $ref and allOf at its top: the referenced and listed schemas merged in.
  Json flatten(const Json& s, const std::string& path, int depth) {
    if (depth > kMaxDepth) {
      return fail<Json>(
          fmt::format("the schema at {} nests deeper than {}", where(path), kMaxDepth));
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) {
        fail(fmt::format("the schema 'false' at {} accepts no value", where(path)));
      }
      return Json::object();
    }
    if (!s.is_object()) {
      return fail<Json>(
          fmt::format("the schema at {} must be an object, not {}", where(path), type_name(s)));
    }
    if (Status st = check_keywords(s, path); !st.is_ok()) return fail<Json>(st.message());
    if (s.contains("nullable") && !s["nullable"].is_boolean()) {
      return fail<Json>(fmt::format("'nullable' at {} must be a boolean", where(path)));
    }
    // nullable: this schema's own adds null; the merged ones' only when all of them are.
    Json out = s;
    out.erase("$ref");
    out.erase("allOf");
    out.erase("nullable");
    bool members = false, members_nullable = true;
    auto add = [&](const Json& member, const std::string& sub) {
      Json f = flatten(member, sub, depth + 1);
      if (failed()) return;
      members = true;
      members_nullable = members_nullable && is_true(f, "nullable");
      f.erase("nullable");
      out = merge(out, f, sub, nullptr);
    };
    if (s.contains("$ref")) {
      const Json* target = resolve_ref(s["$ref"], path);
      if (target == nullptr) return Json();
      add(*target, s["$ref"].get_ref<const std::string&>().substr(1));
    }
    if (s.contains("allOf")) {
      const Json& all = s["allOf"];
      if (!all.is_array() || all.empty()) {
        return fail<Json>(fmt::format("'allOf' at {} must be a non-empty array", where(path)));
      }
      for (size_t i = 0; i < all.size() && !failed(); ++i) {
        add(all[i], fmt::format("{}/allOf/{}", path, i));
      }
    }
    if (is_true(s, "nullable") || (members && members_nullable)) out["nullable"] = true;
    return out;
  }

  // Both schemas at once (allOf). A type intersection that is empty sets *impossible when given,
  // else is an error; keywords that cannot be combined are errors.
  Json merge(const Json& a, const Json& b, const std::string& path, bool* impossible) {
    if (failed()) return Json();
    Json out = a;
    for (const auto& [key, bv] : b.items()) {
      if (!out.contains(key)) {
        out[key] = bv;
        continue;
      }
      Json& av = out[key];
      if (av == bv || kIgnored.count(key) != 0) continue;
      if (key == "nullable") {
        av = false;  // true and false
      } else if (key == "required" && av.is_array() && bv.is_array()) {
        for (const Json& r : bv) {
          if (std::find(av.begin(), av.end(), r) == av.end()) av.push_back(r);
        }
      } else if (key == "properties" && av.is_object() && bv.is_object()) {
        for (const auto& [pk, pv] : bv.items()) {
          if (!av.contains(pk)) {
            av[pk] = pv;
          } else if (av[pk] != pv) {
            av[pk] = Json{{"allOf", Json::array({av[pk], pv})}};
          }
        }
      } else if (key == "type" || key == "enum") {
        const Json as = av.is_array() ? av : Json::array({av}),
                   bs = bv.is_array() ? bv : Json::array({bv});
        Json both = Json::array();
        for (const Json& t : as) {
          Json x;  // null: not in both
          if (std::find(bs.begin(), bs.end(), t) != bs.end() ||
              (key == "type" && t == "integer" &&
               std::find(bs.begin(), bs.end(), "number") != bs.end())) {
            x = t;
          } else if (key == "type" && t == "number" &&
                     std::find(bs.begin(), bs.end(), "integer") != bs.end()) {
            x = "integer";
          }
          if (!x.is_null() && std::find(both.begin(), both.end(), x) == both.end()) {
            both.push_back(x);
          }
        }
        if (both.empty() && impossible != nullptr) return *impossible = true, Json();
        if (both.empty()) {
          return fail<Json>(
              fmt::format("the '{}' values of the schemas combined at {} have nothing in common",
                          key, where(path)));
        }
        av = both;
      } else if ((key == "additionalProperties" || key == "items") &&
                 (av.is_boolean() || bv.is_boolean())) {
        if (av == false || bv == false) {
          av = false;
        } else if (av == true) {
          av = bv;
        }
      } else if (key == "additionalProperties" || key == "items") {
        av = Json{{"allOf", Json::array({av, bv})}};
      } else if ((key == "minimum" || key == "minLength" || key == "minItems" ||
                  key == "exclusiveMinimum") &&
                 av.is_number() && bv.is_number()) {
        if (bv > av) av = bv;
      } else if ((key == "maximum" || key == "maxLength" || key == "maxItems" ||
                  key == "exclusiveMaximum") &&
                 av.is_number() && bv.is_number()) {
        if (bv < av) av = bv;
      } else {
        return fail<Json>(
            fmt::format("the schemas combined at {} set '{}' to different values, which is "
                        "not supported",
                        where(path), key));
      }
    }
    return out;
  }

  Alts visit(const Json& s, const std::string& name, const std::string& path, int depth) {
    if (failed()) return {};
    if (depth > kMaxDepth) {
      return fail(fmt::format("the schema at {} nests deeper than {}", where(path), kMaxDepth));
    }
    if (s.is_boolean()) {
      if (!s.get<bool>()) {
        return fail(fmt::format("the schema 'false' at {} accepts no value", where(path)));
      }
      return {helper("value")};
    }
    if (!s.is_object()) {
      return fail(fmt::format("the schema at {} must be an object or a boolean, not {}",
                              where(path), type_name(s)));
    }
    if (Status st = check_keywords(s, path); !st.is_ok()) return fail(st.message());
    if (s.contains("$ref") && only_annotations(s, {"$ref"})) {
      return {ref_rule(s["$ref"], path, depth + 1)};
    }
    if (s.contains("$ref") || s.contains("allOf")) {
      const Json flat = flatten(s, path, depth);
      return failed() ? Alts{} : visit(flat, name, path, depth + 1);
    }
    if (s.contains("nullable")) {
      if (!s["nullable"].is_boolean()) {
        return fail(fmt::format("'nullable' at {} must be a boolean", where(path)));
      }
      Json rest = s;
      rest.erase("nullable");
      Alts alts = visit(rest, name, path, depth + 1);
      if (s["nullable"].get<bool>() && !failed()) alts.push_back(lit("null"));
      return alts;
    }
    if (s.contains("anyOf") || s.contains("oneOf")) return any_of(s, name, path, depth);
    if (s.contains("const")) return {lit(dump(s["const"]))};

    std::vector<std::string> types;
    if (s.contains("type")) {
      const Json& t = s["type"];
      for (const Json& x : t.is_array() ? t : Json::array({t})) {
        if (!x.is_string()) {
          return fail(
              fmt::format("'type' at {} must be a string or an array of strings", where(path)));
        }
        if (kTypes.count(x.get<std::string>()) == 0) {
          return fail(fmt::format("the type '{}' at {} is not a JSON Schema type",
                                  x.get<std::string>(), where(path)));
        }
        types.push_back(x.get<std::string>());
      }
      if (types.empty()) return fail(fmt::format("'type' at {} is an empty array", where(path)));
    }
    if (s.contains("enum")) return enum_alts(s, types, path);
    if (!s.contains("type")) {  // the types the keywords imply (a schema of none is any value)
      auto has = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
      };
      if (has({"properties", "required", "additionalProperties"})) types.push_back("object");
      if (has({"items", "prefixItems", "minItems", "maxItems"})) types.push_back("array");
      if (has({"minLength", "maxLength", "pattern", "format"})) types.push_back("string");
      if (has({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})) {
        types.push_back("number");
      }
      if (types.empty()) return {helper("value")};
    }
    Alts alts;
    for (const std::string& t : types) {
      Alts a;
      if (t == "null") a = {lit("null")};
      if (t == "boolean") a = {helper("boolean")};
      if (t == "string") a = string_alts(s, path);
      if (t == "number" || t == "integer") a = number_alts(s, t == "integer", path);
      if (t == "object") a = object_alts(s, name, path, depth);
      if (t == "array") a = array_alts(s, name, path, depth);
      if (failed()) return {};
      alts.insert(alts.end(), a.begin(), a.end());
    }
    return alts;
  }

  Alts any_of(const Json& s, const std::string& name, const std::string& path, int depth) {
    if (s.contains("anyOf") && s.contains("oneOf")) {
      return fail(fmt::format("'anyOf' and 'oneOf' together at {} are not supported", where(path)));
    }
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";
    const Json& list = s[key];
    if (!list.is_array() || list.empty()) {
      return fail(fmt::format("'{}' at {} must be a non-empty array", key, where(path)));
    }
    Json rest = s;
    rest.erase(key);
    const bool alone = only_annotations(rest, {});
    Alts alts;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string sub = fmt::format("{}/{}/{}", path, key, i);
      Json alt = list[i];
      if (!alone) {  // the other keywords apply to every alternative
        bool impossible = false;
        alt = merge(rest, flatten(list[i], sub, depth + 1), sub, &impossible);
        if (impossible) continue;
      }
      const std::string e = rule_for(alt, child(name, std::to_string(i)), sub, depth + 1);
      if (failed()) return {};
      if (std::find(alts.begin(), alts.end(), e) == alts.end()) alts.push_back(e);
    }
    if (alts.empty()) {
      return fail(fmt::format("no alternative of '{}' at {} is possible", key, where(path)));
    }
    return alts;
  }

  Alts enum_alts(const Json& s, const std::vector<std::string>& types, const std::string& path) {
    const Json& values = s["enum"];
    if (!values.is_array() || values.empty()) {
      return fail(fmt::format("'enum' at {} must be a non-empty array", where(path)));
    }
    Alts alts;
    for (const Json& v : values) {
      const std::string t = v.is_null()           ? "null"
                            : v.is_boolean()      ? "boolean"
                            : v.is_string()       ? "string"
                            : v.is_number_float() ? "number"
                            : v.is_number()       ? "integer"
                            : v.is_array()        ? "array"
                                                  : "object";
      const auto has = [&](const char* x) {
        return std::find(types.begin(), types.end(), x) != types.end();
      };
      if (!types.empty() && !has(t.c_str()) && !(t == "integer" && has("number"))) continue;
      const std::string l = lit(dump(v));
      if (std::find(alts.begin(), alts.end(), l) == alts.end()) alts.push_back(l);
    }
    if (alts.empty()) {
      return fail(fmt::format("no value of 'enum' at {} has the schema's type", where(path)));
    }
    return alts;
  }

  // A non-negative integer keyword (absent: `fallback`); false after an error.
  bool count(const Json& s, const char* key, const std::string& path, int64_t fallback,
             int64_t* out) {
    *out = fallback;
    if (!s.contains(key)) return true;
    const Json& v = s[key];
    if (v.is_number_unsigned()) {
      *out = static_cast<int64_t>(std::min<uint64_t>(v.get<uint64_t>(), kMaxRepetition + 1));
    } else if (v.is_number_integer() && v.get<int64_t>() >= 0) {
      *out = std::min<int64_t>(v.get<int64_t>(), kMaxRepetition + 1);
    } else if (v.is_number_float() && v.get<double>() >= 0 &&
               v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
      *out = std::min<int64_t>(static_cast<int64_t>(v.get<double>()), kMaxRepetition + int64_t{1});
    } else {
      fail(fmt::format("'{}' at {} must be a non-negative integer, not {}", key, where(path),
                       type_name(v)));
      return false;
    }
    return true;
  }

  // minX / maxX as repetition bounds: max -1 for none; an error past kMaxRepetition.
  bool bounds(const Json& s, const char* min_key, const char* max_key, const std::string& path,
              int64_t* min, int64_t* max) {
    if (!count(s, min_key, path, 0, min) || !count(s, max_key, path, -1, max)) return false;
    if (*min > kMaxRepetition || *max > kMaxRepetition) {
      fail(fmt::format("'{}' / '{}' at {} above {} are not supported", min_key, max_key,
                       where(path), kMaxRepetition));
      return false;
    }
    if (*max >= 0 && *min > *max) {
      fail(
          fmt::format("'{}' {} at {} is above '{}' {}", min_key, *min, where(path), max_key, *max));
      return false;
    }
    return true;
  }

  Alts string_alts(const Json& s, const std::string& path) {
    int64_t min = 0, max = -1;
    if (!bounds(s, "minLength", "maxLength", path, &min, &max)) return {};
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) {
        return fail(fmt::format("'pattern' at {} must be a string", where(path)));
      }
      if (lengths || s.contains("format")) {
        return fail(fmt::format(
            "'pattern' together with 'minLength', 'maxLength' or 'format' at {} is not supported",
            where(path)));
      }
      auto body = RegexConverter(s["pattern"].get_ref<const std::string&>(), path).convert();
      if (!body) return fail(body.status().message());
      return {seq({kQuote, *body, kQuote})};
    }
    if (s.contains("format")) {
      const Json& f = s["format"];
      if (!f.is_string() || kStringFormats.count(f.get<std::string>()) == 0) {
        return fail(fmt::format(
            "the string format {} at {} is not supported (supported: date, time, date-time, uuid, "
            "email, hostname, ipv4, uri)",
            dump(f), where(path)));
      }
      if (lengths) {
        return fail(
            fmt::format("'format' together with 'minLength' or 'maxLength' at {} is not supported",
                        where(path)));
      }
      return {seq({kQuote, helper(f.get<std::string>()), kQuote})};
    }
    if (min == 0 && max < 0) return {helper("string")};
    return {seq({kQuote, repeat(helper("char"), min, max), kQuote})};
  }

  bool bound(const Json& s, const char* key, const std::string& path, std::optional<Bound>* out,
             bool lower) {
    if (!s.contains(key)) return true;
    const Json& v = s[key];
    const bool exclusive = std::string(key).rfind("exclusive", 0) == 0;
    if (exclusive && v.is_boolean()) {  // draft 4: a flag on minimum / maximum
      if (v.get<bool>() && out->has_value()) (*out)->strict = true;
      return true;
    }
    if (!v.is_number()) {
      return fail<bool>(
          fmt::format("'{}' at {} must be a number, not {}", key, where(path), type_name(v)));
    }
    const std::optional<Dec> d = parse_dec(v);
    if (!d) {
      return fail<bool>(
          fmt::format("'{}' {} at {} has an exponent beyond +-400", key, dump(v), where(path)));
    }
    Bound b{*d, exclusive};
    round_bound(&b.d, &b.strict, lower);
    const int c = out->has_value() ? compare(b.d, (*out)->d) : 0;
    if (!out->has_value() || (lower ? c > 0 : c < 0) || (c == 0 && b.strict)) *out = b;
    return true;
  }

  Alts number_alts(const Json& s, bool integer, const std::string& path) {
    std::optional<Bound> lo, hi;
    if (!bound(s, "minimum", path, &lo, true) || !bound(s, "exclusiveMinimum", path, &lo, true) ||
        !bound(s, "maximum", path, &hi, false) || !bound(s, "exclusiveMaximum", path, &hi, false)) {
      return {};
    }
    if (s.contains("format")) {
      const Json& f = s["format"];
      const std::set<std::string> ok = integer ? std::set<std::string>{"int32", "int64"}
                                               : std::set<std::string>{"float", "double"};
      if (!f.is_string() || ok.count(f.get<std::string>()) == 0) {
        return fail(fmt::format("the {} format {} at {} is not supported",
                                integer ? "integer" : "number", dump(f), where(path)));
      }
      if (f == "int32") {
        const Bound min32{*parse_dec(Json(-2147483648LL)), false},
            max32{*parse_dec(Json(2147483647LL)), false};
        if (!lo || compare(lo->d, min32.d) < 0) lo = min32;
        if (!hi || compare(hi->d, max32.d) > 0) hi = max32;
      }
    }
    if (!lo && !hi) return {helper(integer ? "integer" : "number")};
    if (integer) {  // as inclusive integer bounds: ceil / floor
      const int64_t cap = static_cast<int64_t>(kIntCap);
      int64_t l = -cap, h = cap;
      if (lo) {
        const Dec& d = lo->d;
        const int64_t ip = d.huge ? cap + 1 : static_cast<int64_t>(d.ip);
        l = !d.neg ? ip + (lo->strict || !d.fp.empty() ? 1 : 0)
                   : -ip + (lo->strict && d.fp.empty() ? 1 : 0);
      }
      if (hi) {
        const Dec& d = hi->d;
        const int64_t ip = d.huge ? cap + 1 : static_cast<int64_t>(d.ip);
        h = d.neg ? -ip - (hi->strict || !d.fp.empty() ? 1 : 0)
                  : ip - (hi->strict && d.fp.empty() ? 1 : 0);
      }
      l = std::max(l, -cap);
      h = std::min(h, cap);
      if (l > h) {
        return fail(fmt::format("no integer of at most 16 digits lies within the bounds at {}",
                                where(path)));
      }
      Alts alts;
      if (l < 0) {
        alts.push_back(seq({lit("-"), element(uint_range(h < 0 ? static_cast<uint64_t>(-h) : 1,
                                                         static_cast<uint64_t>(-l)))}));
      }
      if (h >= 0) {
        for (std::string& a :
             uint_range(static_cast<uint64_t>(std::max<int64_t>(l, 0)), static_cast<uint64_t>(h))) {
          alts.push_back(std::move(a));
        }
      }
      return alts;
    }
    Alts alts;
    if (!lo || lo->d.neg) {  // negative numbers: magnitudes between |hi| (or 0, exclusive) and |lo|
      std::optional<Bound> mlo = (hi && hi->d.neg) ? hi : Bound{Dec{}, true};
      std::optional<Bound> mhi = lo;
      if (mlo) mlo->d.neg = false;
      if (mhi) mhi->d.neg = false;
      const Alts neg = magnitude_range(mlo, mhi);
      if (!neg.empty()) alts.push_back(seq({lit("-"), element(neg)}));
    }
    if (!hi || !hi->d.neg) {
      const Alts pos = magnitude_range(lo && !lo->d.neg ? lo : std::nullopt, hi);
      alts.insert(alts.end(), pos.begin(), pos.end());
    }
    if (alts.empty()) {
      return fail(fmt::format("no number lies within the bounds at {}", where(path)));
    }
    return alts;
  }

  // A JSON string that is none of `keys` (keys whose JSON text has an escape, or longer than 64
  // bytes, are not excluded: the exclusion nests a group per character, and GBNF groups nest at
  // most 100 deep).
  std::string key_not_in(const std::vector<std::string>& keys) {
    struct Node {
      std::map<uint32_t, size_t> next;
      bool end = false;
    };
    std::vector<Node> trie(1);
    for (const std::string& key : keys) {
      const std::string text = dump(Json(key));
      if (text.find('\\') != std::string::npos || text.size() > 66) continue;
      size_t n = 0;
      for (size_t i = 1; i + 1 < text.size();) {
        const auto c = static_cast<unsigned char>(text[i]);
        const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
        for (size_t k = 1; k < len; ++k) {
          cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
        }
        i += len;
        auto it = trie[n].next.find(cp);
        if (it == trie[n].next.end()) {
          trie.push_back(Node{});
          it = trie[n].next.emplace(cp, trie.size() - 1).first;
        }
        n = it->second;
      }
      trie[n].end = true;
    }
    const std::string any = helper("char") + "*";
    std::function<std::string(size_t)> rest = [&](size_t n) {
      Alts alts;
      if (!trie[n].end) alts.push_back(kQuote);
      std::string excluded = R"("\\\x00-\x1F)";
      for (const auto& [cp, next] : trie[n].next) {
        std::string bytes;
        append_utf8(cp, &bytes);
        alts.push_back(seq({lit(bytes), rest(next)}));
        excluded += class_char(cp);
      }
      alts.push_back(seq({"( [^" + excluded + "] | " + kEscape + " )", any, kQuote}));
      return element(alts);
    };
    if (trie[0].next.empty() && !trie[0].end) return helper("string");
    return seq({kQuote, rest(0)});
  }

  Alts object_alts(const Json& s, const std::string& name, const std::string& path, int depth) {
    const Json no_props = Json::object(), no_required = Json::array();
    const Json& props = s.contains("properties") ? s["properties"] : no_props;
    const Json& required = s.contains("required") ? s["required"] : no_required;
    if (!props.is_object()) {
      return fail(fmt::format("'properties' at {} must be an object", where(path)));
    }
    if (!required.is_array()) {
      return fail(fmt::format("'required' at {} must be an array of strings", where(path)));
    }
    for (const Json& r : required) {
      if (!r.is_string()) {
        return fail(fmt::format("'required' at {} must be an array of strings", where(path)));
      }
    }
    const Json extra = s.contains("additionalProperties") ? s["additionalProperties"] : Json(true);
    const bool extras = !(extra.is_boolean() && !extra.get<bool>());
    if (props.empty() && required.empty() && extra == true) return {helper("object")};
    auto is_required = [&](const std::string& k) {
      return std::find(required.begin(), required.end(), k) != required.end();
    };

    struct Item {
      std::string kv;
      bool required;
    };
    std::vector<Item> items;
    std::vector<std::string> keys;
    auto add = [&](const std::string& key, const Json& schema, const std::string& sub) {
      keys.push_back(key);
      if (schema.is_boolean() && !schema.get<bool>()) {  // the key must not appear
        if (is_required(key)) {
          fail(fmt::format("the required property '{}' at {} has the schema 'false'", key,
                           where(path)));
        }
        return;
      }
      const std::string value = rule_for(schema, child(name, key), sub, depth + 1);
      items.push_back({seq({lit(dump(Json(key))), sp(), lit(":"), sp(), value}), is_required(key)});
    };
    for (const auto& [key, schema] : props.items()) {
      add(key, schema, path + "/properties/" + pointer_token(key));
    }
    for (const Json& r : required) {
      const std::string& key = r.get_ref<const std::string&>();
      if (props.contains(key)) continue;
      if (!extras) {
        return fail(
            fmt::format("the required property '{}' at {} is not in 'properties' and "
                        "additionalProperties is false",
                        key, where(path)));
      }
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        add(key, extra, path + "/additionalProperties");
      }
    }
    if (failed()) return {};
    std::string extra_kv;
    if (extras) {
      const std::string value =
          rule_for(extra, child(name, "additional"), path + "/additionalProperties", depth + 1);
      if (failed()) return {};
      const std::string kv_name = fresh(child(name, "extra-kv"));
      rules_.emplace_back(kv_name, seq({key_not_in(keys), sp(), lit(":"), sp(), value}));
      extra_kv = kv_name;
    }
    const std::string open = seq({lit("{"), sp()}), close = seq({sp(), lit("}")});
    const std::string more_extras = extras ? "( " + sep() + " " + extra_kv + " )*" : "";
    if (items.empty()) {
      if (!extras) return {seq({lit("{"), sp(), lit("}")})};
      return {seq({open, "(", extra_kv, more_extras, sp(), ")?", lit("}")})};
    }
    // The first property written may be any optional one before the first required one; what
    // follows property i is the same whatever came before, so it is one rule per i.
    const size_t n = items.size();
    size_t last_start = n - 1;
    for (size_t i = 0; i < n; ++i) {
      if (items[i].required) {
        last_start = i;
        break;
      }
    }
    auto item_after = [&](size_t j) {
      const std::string x = seq({sep(), items[j].kv});
      return items[j].required ? x : "( " + x + " )?";
    };
    std::vector<std::string> rest(n);  // what may follow property i
    Alts tail;
    for (size_t j = last_start + 1; j < n; ++j) tail.push_back(item_after(j));
    tail.push_back(more_extras);
    rest[last_start] = join(tail, " ");
    const bool any_required = items[last_start].required;
    const size_t starts = last_start + 1 + (any_required ? 0 : 1);
    if (starts > 1) {
      for (size_t i = last_start + 1; i-- > 0;) {
        if (i < last_start) rest[i] = seq({item_after(i + 1), rest[i + 1]});
        if (rest[i].empty() || is_one_element(rest[i])) continue;
        const std::string rule = fresh(child(name, "after-" + std::to_string(i)));
        rules_.emplace_back(rule, rest[i]);
        rest[i] = rule;
      }
    } else {
      rest[0] = rest[last_start];
    }
    Alts firsts;
    for (size_t i = 0; i <= last_start; ++i) firsts.push_back(seq({items[i].kv, rest[i]}));
    if (!any_required && extras) firsts.push_back(seq({extra_kv, more_extras}));
    if (any_required) return {seq({open, inline_alts(firsts), close})};
    return {seq({open, "(", element(firsts), sp(), ")?", lit("}")})};
  }

  Alts array_alts(const Json& s, const std::string& name, const std::string& path, int depth) {
    const Json any = true;
    const Json* prefix = nullptr;
    const Json* rest = &any;
    std::string prefix_key = "prefixItems", rest_key = "items";
    if (s.contains("prefixItems")) {
      prefix = &s["prefixItems"];
      if (s.contains("items")) rest = &s["items"];
    } else if (s.contains("items") && s["items"].is_array()) {  // draft 4-7 tuples
      prefix = &s["items"];
      prefix_key = "items";
      rest_key = "additionalItems";
      if (s.contains("additionalItems")) rest = &s["additionalItems"];
    } else if (s.contains("items")) {
      rest = &s["items"];
    }
    if (prefix != nullptr && !prefix->is_array()) {
      return fail(fmt::format("'{}' at {} must be an array", prefix_key, where(path)));
    }
    int64_t min = 0, max = -1;
    if (!bounds(s, "minItems", "maxItems", path, &min, &max)) return {};
    const int64_t k = prefix == nullptr ? 0 : static_cast<int64_t>(prefix->size());
    if (rest->is_boolean() && !rest->get<bool>()) {
      max = max < 0 ? k : std::min(max, k);
      if (min > max) {
        return fail(fmt::format("'minItems' {} at {} needs more items than '{}' allows", min,
                                where(path), prefix_key));
      }
    }
    if (k == 0 && *rest == true && min == 0 && max < 0) return {helper("array")};
    if (max == 0) return {seq({lit("["), sp(), lit("]")})};
    std::vector<std::string> elems;
    for (int64_t i = 0; i < k && (max < 0 || i < max); ++i) {
      elems.push_back(rule_for((*prefix)[static_cast<size_t>(i)], child(name, std::to_string(i)),
                               fmt::format("{}/{}/{}", path, prefix_key, i), depth + 1));
    }
    std::string item;
    if (max < 0 || max > k) {
      item = rule_for(*rest, child(name, "item"), path + "/" + rest_key, depth + 1);
    }
    if (failed()) return {};
    std::function<std::string(int64_t)> tail = [&](int64_t i) -> std::string {
      if (max >= 0 && i >= max) return "";
      if (i >= k) {
        return repeat("( " + sep() + " " + item + " )", std::max<int64_t>(min - i, 0),
                      max < 0 ? -1 : max - i);
      }
      const std::string x = seq({sep(), elems[static_cast<size_t>(i)], tail(i + 1)});
      return i < min ? x : "( " + x + " )?";
    };
    const std::string first = seq({k > 0 ? elems[0] : item, tail(1)});
    if (min == 0) return {seq({lit("["), sp(), "(", first, sp(), ")?", lit("]")})};
    return {seq({lit("["), sp(), first, sp(), lit("]")})};
  }

  const Json& root_;
  std::string prefix_;
  std::string root_name_;
  std::vector<std::pair<std::string, std::string>> rules_;  // name, body ("" = not emitted)
  std::set<std::string> names_;                             // taken rule names
  std::set<std::string> defined_;                           // helper rules made
  std::map<std::string, std::string> ref_names_;            // $ref -> rule name
  Status status_;
};

}  // namespace

Expected<std::string> json_schema_to_gbnf(const nlohmann::json& schema) {
  return json_schema_to_gbnf(Json(schema));
}

Expected<std::string> json_schema_to_gbnf(const nlohmann::ordered_json& schema) {
  return Converter(schema, "").run();
}

Expected<std::string> json_schema_rules(const nlohmann::json& schema, std::string_view prefix) {
  return json_schema_rules(Json(schema), prefix);
}

Expected<std::string> json_schema_rules(const nlohmann::ordered_json& schema,
                                        std::string_view prefix) {
  if (prefix.empty() ||
      prefix.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "0123456789-") != std::string_view::npos) {
    return Status::errorf("the rule prefix '{}' must be letters, digits and '-'", prefix);
  }
  return Converter(schema, std::string(prefix)).run();
}

std::string json_object_gbnf() {
  const Json s = {{"type", "object"}};
  return *Converter(s, "").run();
}

}  // namespace ponder::grammar
