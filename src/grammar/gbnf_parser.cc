#include "grammar/gbnf_parser.h"

#include <fmt/core.h>

#include <algorithm>

namespace ponder::grammar {

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < s_.size(); ++i) {
      if (s_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  Expected<std::vector<GbnfRule>> parse() {
    std::vector<GbnfRule> rules;
    skip_space(true);
    while (ok() && pos_ < s_.size()) {
      GbnfRule rule;
      rule.line = line_of(pos_);
      rule.column = column_of(pos_);
      rule.name = name();
      if (!ok()) break;
      if (rule.name.empty()) {
        fail("expected a rule name");
        break;
      }
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") {
        fail("expected '::=' after the rule name '" + rule.name + "'");
        break;
      }
      pos_ += 3;
      skip_space(true);
      rule.alts = alternatives(false);
      if (!ok()) break;
      if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') {
        fail(fmt::format("unexpected '{}'", s_[pos_]));
        break;
      }
      rules.push_back(std::move(rule));
      skip_space(true);
    }
    if (!ok()) return Status::error(error_);
    return rules;
  }

 private:
  bool ok() const { return error_.empty(); }

  // Lines are found by a binary search of their starts (every element records its place: a scan
  // from the start each time made a long generated grammar quadratic).
  int32_t line_of(size_t pos) const {
    return static_cast<int32_t>(std::upper_bound(line_starts_.begin(), line_starts_.end(), pos) -
                                line_starts_.begin());
  }
  int32_t column_of(size_t pos) const {
    return static_cast<int32_t>(pos - line_starts_[static_cast<size_t>(line_of(pos)) - 1] + 1);
  }

  void fail(const std::string& what) {
    if (error_.empty())
      error_ = fmt::format("line {}, column {}: {}", line_of(pos_), column_of(pos_), what);
  }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  std::vector<GbnfSequence> alternatives(bool nested) {
    std::vector<GbnfSequence> alts;
    alts.push_back(sequence(nested));
    while (ok() && pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(sequence(nested));
    }
    return alts;
  }

  GbnfSequence sequence(bool nested) {
    GbnfSequence seq;
    while (ok() && pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      GbnfElement e;
      e.line = line_of(pos_);
      e.column = column_of(pos_);
      if (c == '"') {
        ++pos_;
        e.kind = GbnfElement::Kind::kLiteral;
        while (ok() && pos_ < s_.size() && s_[pos_] != '"') {
          if (s_[pos_] == '\n') return fail("a literal must end on its line"), seq;
          uint32_t cp = 0;
          if (!character(&cp)) return seq;
          append_utf8(cp, &e.text);
        }
        if (pos_ >= s_.size()) return fail("unterminated literal"), seq;
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        e.kind = GbnfElement::Kind::kClass;
        if (pos_ < s_.size() && s_[pos_] == '^') {
          e.negated = true;
          ++pos_;
        }
        while (ok() && pos_ < s_.size() && s_[pos_] != ']') {
          if (s_[pos_] == '\n') return fail("a character class must end on its line"), seq;
          uint32_t lo = 0, hi = 0;
          if (!character(&lo)) return seq;
          hi = lo;
          if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
            ++pos_;
            if (!character(&hi)) return seq;
            if (hi < lo)
              return fail(fmt::format("the range U+{:04X}-U+{:04X} is empty", lo, hi)), seq;
          }
          e.ranges.push_back({lo, hi});
        }
        if (pos_ >= s_.size()) return fail("unterminated character class"), seq;
        ++pos_;
      } else if (c == '.') {
        ++pos_;
        e.kind = GbnfElement::Kind::kClass;
        e.ranges.push_back({0, 0x10FFFF});
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        e.kind = GbnfElement::Kind::kGroup;
        // Groups nest by recursion: bounded, so a request's grammar cannot overflow the stack.
        if (++depth_ > kMaxNesting)
          return fail(fmt::format("groups nested deeper than {}", kMaxNesting)), seq;
        e.alts = alternatives(true);
        --depth_;
        if (!ok()) return seq;
        if (pos_ >= s_.size() || s_[pos_] != ')') return fail("expected ')'"), seq;
        ++pos_;
      } else if (is_name_char(c)) {
        e.kind = GbnfElement::Kind::kRef;
        e.text = name();
        // `name ::=` starts the next rule: only possible after a newline, which ends a sequence,
        // except inside a group, where it is a missing ')'.
        size_t p = pos_;
        while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
        if (s_.substr(p, 3) == "::=") return fail("expected ')' before the next rule"), seq;
      } else if (c == '<') {
        return fail("token references (<...>) are not supported"), seq;
      } else if (c == '!') {
        return fail("negation (!) is not supported"), seq;
      } else {
        return fail(fmt::format("unexpected '{}'", c)), seq;
      }
      postfix(&e);
      if (!ok()) return seq;
      seq.push_back(std::move(e));
      skip_space(nested);
    }
    return seq;
  }

  void postfix(GbnfElement* e) {
    skip_space(false);
    if (pos_ >= s_.size()) return;
    const char c = s_[pos_];
    if (c == '*' || c == '+' || c == '?') {
      ++pos_;
      e->min = c == '+' ? 1 : 0;
      e->max = c == '?' ? 1 : -1;
    } else if (c == '{') {
      ++pos_;
      skip_space(false);
      int64_t m = 0, n = 0;
      if (!number(&m)) return fail("expected a number after '{'");
      n = m;
      skip_space(false);
      if (pos_ < s_.size() && s_[pos_] == ',') {
        ++pos_;
        skip_space(false);
        if (pos_ < s_.size() && s_[pos_] == '}') {
          n = -1;
        } else if (!number(&n)) {
          return fail("expected a number or '}' after ','");
        }
        skip_space(false);
      }
      if (pos_ >= s_.size() || s_[pos_] != '}') return fail("expected '}'");
      ++pos_;
      if (m > kMaxRepetition || n > kMaxRepetition)
        return fail(fmt::format("repetition bounds above {} are not supported", kMaxRepetition));
      if (n >= 0 && n < m) return fail(fmt::format("the repetition {{{},{}}} is empty", m, n));
      e->min = static_cast<int32_t>(m);
      e->max = static_cast<int32_t>(n);
    } else {
      return;
    }
    skip_space(false);
    if (pos_ < s_.size() &&
        (s_[pos_] == '*' || s_[pos_] == '+' || s_[pos_] == '?' || s_[pos_] == '{')) {
      fail("two repetition operators in a row: put the element in ( ) first");
    }
  }

  bool number(int64_t* out) {
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9' && pos_ - start < 9)
      v = v * 10 + (s_[pos_++] - '0');
    *out = v;
    return pos_ > start;
  }

  bool hex(int digits, uint32_t* out) {
    uint32_t v = 0;
    for (int i = 0; i < digits; ++i) {
      if (pos_ >= s_.size()) return fail("unterminated escape"), false;
      const char c = s_[pos_++];
      int d = (c >= '0' && c <= '9')   ? c - '0'
              : (c >= 'a' && c <= 'f') ? c - 'a' + 10
              : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                       : -1;
      if (d < 0) return --pos_, fail(fmt::format("'{}' is not a hex digit", c)), false;
      v = v * 16 + static_cast<uint32_t>(d);
    }
    *out = v;
    return true;
  }

  // One character of a literal or class: UTF-8 or an escape.
  bool character(uint32_t* cp) {
    const unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c == '\\') {
      ++pos_;
      if (pos_ >= s_.size()) return fail("unterminated escape"), false;
      const char e = s_[pos_++];
      switch (e) {
        case 'n':
          *cp = '\n';
          return true;
        case 'r':
          *cp = '\r';
          return true;
        case 't':
          *cp = '\t';
          return true;
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
          *cp = static_cast<uint32_t>(e);
          return true;
        case 'x':
          if (!hex(2, cp)) return false;
          break;
        case 'u':
          if (!hex(4, cp)) return false;
          break;
        case 'U':
          if (!hex(8, cp)) return false;
          break;
        default:
          return --pos_, fail(fmt::format("unknown escape '\\{}'", e)), false;
      }
      if (*cp > 0x10FFFF || (*cp >= 0xD800 && *cp <= 0xDFFF))
        return fail(fmt::format("U+{:X} is not a character", *cp)), false;
      return true;
    }
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || pos_ + static_cast<size_t>(n) > s_.size()) return fail("invalid UTF-8"), false;
    uint32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const unsigned char b = static_cast<unsigned char>(s_[pos_ + static_cast<size_t>(i)]);
      if ((b >> 6) != 2) return fail("invalid UTF-8"), false;
      v = (v << 6) | (b & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < kMin[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
      return fail("invalid UTF-8"), false;
    pos_ += static_cast<size_t>(n);
    *cp = v;
    return true;
  }

  std::string_view s_;
  std::vector<size_t> line_starts_;  // offsets where each line begins
  static constexpr int kMaxNesting = 100;
  int depth_ = 0;  // ( groups open
  size_t pos_ = 0;
  std::string error_;
};

}  // namespace

Expected<std::vector<GbnfRule>> parse_gbnf(std::string_view text) { return Parser(text).parse(); }

}  // namespace ponder::grammar
