// Grammar: a GBNF grammar (llama.cpp's syntax) compiled to a byte-level pushdown automaton.
//
// Compilation turns every character class into UTF-8 byte ranges and every repetition into
// right-recursive helper rules, so the automaton reads bytes: a token whose bytes end inside a
// multi-byte character is matched like any other. A parse state is a set of stacks; stacks are
// hash-consed nodes (a grammar position and the node to return to), so equal states are equal
// ids and a state's successors and token masks are memoized in the Grammar, shared by every
// request that uses it (the lazily built DFA of docs/structured-outputs.md). A Grammar is
// thread-safe: its memo tables are guarded by one mutex.
//
// Syntax accepted (llama.cpp's GBNF): `name ::= alternatives` rules, `|`, sequences, "literals"
// and [classes] with \n \r \t \\ \" \] \- \xHH \uHHHH \UHHHHHHHH escapes, [^negated] classes,
// ranges, `.` (any character), ( groups ), postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`, comments
// from `#` to the end of the line. A rule ends at a newline unless inside ( ) or after `|`.
// `root` is the start rule. Left recursion is refused (it has no finite expansion).
// Depends on base only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace ponder::grammar {

class Program;  // the compiled rules and the memo tables (grammar.cc)

struct CompileOptions {
  // Up to this many "\n" may come before `root`: R1 answers open with a blank line after
  // "</think>", which the constraint must let through.
  int32_t leading_newlines = 0;
};

class Grammar {
 public:
  // Errors name the line and column: "line 3, column 12: expected '::='".
  static Expected<std::shared_ptr<Grammar>> compile(std::string_view gbnf,
                                                    const CompileOptions& options = {});
  ~Grammar();

  const std::string& text() const { return text_; }
  const CompileOptions& options() const { return options_; }
  // True when `bytes` is a whole sentence of the grammar.
  bool accepts(std::string_view bytes) const;
  // True when `bytes` can be continued into a sentence (every prefix of a sentence).
  bool accepts_prefix(std::string_view bytes) const;

  Program& program() const { return *program_; }

 private:
  Grammar() = default;
  std::string text_;
  CompileOptions options_;
  std::unique_ptr<Program> program_;
};

// Compiled grammars by their text and options, the most recently used kept: a schema sent with
// every request is compiled once, and its memo (states, masks) is shared by all of them.
class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity);
  ~GrammarCache();
  Expected<std::shared_ptr<Grammar>> get(std::string_view gbnf, const CompileOptions& options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ponder::grammar
