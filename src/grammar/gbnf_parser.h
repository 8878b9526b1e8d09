// The GBNF parser: grammar text -> rules of alternatives of sequences of elements (literals as
// UTF-8 bytes, character classes as code point ranges, rule references, groups), each with its
// repetition bounds. No meaning is given here beyond the syntax: grammar.cc compiles the rules.
// Errors name the line and column. Internal to the grammar layer.
// Depends on base only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace ponder::grammar {

struct CodeRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};

struct GbnfElement {
  enum class Kind { kLiteral, kClass, kRef, kGroup };
  Kind kind = Kind::kLiteral;
  std::string text;                            // kLiteral: the bytes; kRef: the rule's name
  std::vector<CodeRange> ranges;               // kClass (`.` is [\x00-\U0010FFFF])
  bool negated = false;                        // kClass: [^...]
  std::vector<std::vector<GbnfElement>> alts;  // kGroup
  int32_t min = 1, max = 1;                    // repetition; max -1: unbounded
  int32_t line = 0, column = 0;                // where it starts (for errors)
};

using GbnfSequence = std::vector<GbnfElement>;

struct GbnfRule {
  std::string name;
  std::vector<GbnfSequence> alts;
  int32_t line = 0, column = 0;
};

constexpr int32_t kMaxRepetition = 10000;  // {m,n} bounds above this are refused

Expected<std::vector<GbnfRule>> parse_gbnf(std::string_view text);

// UTF-8 of one code point (<= 0x10FFFF).
void append_utf8(uint32_t cp, std::string* out);

}  // namespace ponder::grammar
