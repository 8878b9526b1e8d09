// The GBNF compiler and the byte-level automaton: syntax errors with their line and column,
// every construct of llama.cpp's syntax accepted and refused where it should be, UTF-8 classes,
// repetition bounds, recursion, and left recursion refused.
#include "grammar/grammar.h"

#include <gtest/gtest.h>

#include <string>

namespace ponder::grammar {
namespace {

std::shared_ptr<Grammar> compile_ok(std::string_view text) {
  auto g = Grammar::compile(text);
  if (!g.has_value()) ADD_FAILURE() << g.status().message();
  return g.has_value() ? *g : nullptr;
}

std::string compile_error(std::string_view text) {
  auto g = Grammar::compile(text);
  return g.has_value() ? "" : g.status().message();
}

TEST(GrammarTest, LiteralsAndAlternatives) {
  auto g = compile_ok("root ::= \"yes\" | \"no\" | \"maybe\"\n");
  EXPECT_TRUE(g->accepts("yes"));
  EXPECT_TRUE(g->accepts("maybe"));
  EXPECT_FALSE(g->accepts("ye"));
  EXPECT_TRUE(g->accepts_prefix("ye"));
  EXPECT_FALSE(g->accepts("yess"));
  EXPECT_FALSE(g->accepts_prefix("x"));
  EXPECT_FALSE(g->accepts(""));
}

TEST(GrammarTest, ClassesRangesAndNegation) {
  auto g = compile_ok("root ::= [a-c0-9_] [^a-z\\n]\n");
  EXPECT_TRUE(g->accepts("aZ"));
  EXPECT_TRUE(g->accepts("9!"));
  EXPECT_TRUE(g->accepts("_\xC3\xA9"));  // é is not in a-z
  EXPECT_FALSE(g->accepts("dZ"));
  EXPECT_FALSE(g->accepts("aq"));
  EXPECT_FALSE(g->accepts("a\n"));
}

TEST(GrammarTest, Utf8ClassesReadBytes) {
  auto g = compile_ok("root ::= [α-ω]+ \"→\" .\n");
  EXPECT_TRUE(g->accepts("αβγ→x"));
  EXPECT_TRUE(g->accepts("ω→\xF0\x9F\x98\x80"));  // 😀, four bytes
  EXPECT_TRUE(g->accepts_prefix("\xCE"));         // the first byte of α alone
  EXPECT_FALSE(g->accepts("a→x"));
  EXPECT_FALSE(g->accepts("α→"));
  EXPECT_FALSE(g->accepts("α→\xED\xA0\x80"));  // a surrogate is not a character
}

TEST(GrammarTest, Repetitions) {
  auto g = compile_ok("root ::= \"a\"{2,4} \"b\"* \"c\"+ \"d\"? \"e\"{3} [0-9]{2,}\n");
  EXPECT_TRUE(g->accepts("aacceee12"));
  EXPECT_TRUE(g->accepts("aaaabbbbcdeee123456"));
  EXPECT_FALSE(g->accepts("acceee12"));      // one a
  EXPECT_FALSE(g->accepts("aaaaacceee12"));  // five a
  EXPECT_FALSE(g->accepts("aaeee12"));       // no c
  EXPECT_FALSE(g->accepts("aacceeee12"));    // four e
  EXPECT_FALSE(g->accepts("aacceee1"));      // one digit
}

TEST(GrammarTest, GroupsNestAndRulesReferEachOther) {
  auto g = compile_ok(R"(# a comment
root ::= item ("," ws item)*   # trailing comment
item ::= ( "x" | "y" [0-9] )+
ws   ::= [ ]?
)");
  EXPECT_TRUE(g->accepts("x"));
  EXPECT_TRUE(g->accepts("xy1, x,y2x"));
  EXPECT_FALSE(g->accepts("x,"));
  EXPECT_FALSE(g->accepts("y"));
}

TEST(GrammarTest, MultiLineAlternatives) {
  // As in llama.cpp, a rule goes on after `|` or inside ( ), not at a line starting with `|`.
  auto g = compile_ok("root ::=\n  \"a\" |\n  \"b\" | (\n \"c\"\n | \"d\" )\n");
  ASSERT_TRUE(g);
  for (const char* s : {"a", "b", "c", "d"}) EXPECT_TRUE(g->accepts(s)) << s;
  EXPECT_FALSE(g->accepts("e"));
}

TEST(GrammarTest, RecursionBalancesBrackets) {
  auto g = compile_ok("root ::= \"[\" root* \"]\"\n");
  EXPECT_TRUE(g->accepts("[]"));
  EXPECT_TRUE(g->accepts("[[][[]]]"));
  EXPECT_FALSE(g->accepts("[[]"));
  EXPECT_TRUE(g->accepts_prefix("[[[[[[[["));
  EXPECT_FALSE(g->accepts("[]]"));
  std::string deep(2000, '[');
  deep += std::string(2000, ']');
  EXPECT_TRUE(g->accepts(deep));
}

TEST(GrammarTest, Escapes) {
  auto g = compile_ok(R"(root ::= "\x41\u00e9\t\"\\" [\]\-]
)");
  EXPECT_TRUE(g->accepts("A\xC3\xA9\t\"\\]"));
  EXPECT_TRUE(g->accepts("A\xC3\xA9\t\"\\-"));
}

TEST(GrammarTest, EmptyAlternativeAndNullableRoot) {
  auto g = compile_ok("root ::= \"a\" | \n");
  EXPECT_TRUE(g->accepts(""));
  EXPECT_TRUE(g->accepts("a"));
}

TEST(GrammarTest, LeadingNewlinesOption) {
  CompileOptions o;
  o.leading_newlines = 2;
  auto g = Grammar::compile("root ::= \"{}\"\n", o);
  ASSERT_TRUE(g.has_value());
  EXPECT_TRUE((*g)->accepts("{}"));
  EXPECT_TRUE((*g)->accepts("\n\n{}"));
  EXPECT_FALSE((*g)->accepts("\n\n\n{}"));
}

TEST(GrammarTest, ErrorsNameLineAndColumn) {
  EXPECT_EQ(compile_error("root ::= \"a\"\nfoo := \"b\"\n"),
            "line 2, column 5: expected '::=' after the rule name 'foo'");
  EXPECT_EQ(compile_error("root ::= item\n"), "line 1, column 10: the rule 'item' is not defined");
  EXPECT_EQ(compile_error("item ::= \"a\"\n"), "the grammar has no 'root' rule");
  EXPECT_EQ(compile_error("root ::= \"abc\n"), "line 1, column 14: a literal must end on its line");
  EXPECT_EQ(compile_error("root ::= [z-a]\n"),
            "line 1, column 14: the range U+007A-U+0061 is empty");
  EXPECT_EQ(compile_error("root ::= (\"a\" \n"), "line 2, column 1: expected ')'");
  EXPECT_EQ(compile_error("root ::= \"a\"{3,1}\n"),
            "line 1, column 18: the repetition {3,1} is empty");
  EXPECT_EQ(compile_error("root ::= \"a\"\nroot ::= \"b\"\n"),
            "line 2, column 1: the rule 'root' is defined twice");
  EXPECT_EQ(compile_error("root ::= \"\\q\"\n"), "line 1, column 12: unknown escape '\\q'");
  EXPECT_EQ(compile_error("root ::= \"a\" ? ?\n"),
            "line 1, column 16: two repetition operators in a row: put the element in ( ) first");
}

TEST(GrammarTest, ExpansionIsBounded) {
  // A grammar may come from a request: repetitions that multiply past the bound are refused.
  EXPECT_NE(compile_error("root ::= (\"a\"{9999}){9999}\n").find("expands to more than"),
            std::string::npos);
  EXPECT_EQ(compile_error("x ::= [a]{5000}\ny ::= (x x x x){1000}\nroot ::= y\n"),
            "");  // references do not multiply
  EXPECT_EQ(compile_error("root ::= [a]{0,9999} [b]{9999}\n"), "");
}

TEST(GrammarTest, NestingIsBounded) {
  const std::string deep =
      "root ::= " + std::string(5000, '(') + "\"a\"" + std::string(5000, ')') + "\n";
  EXPECT_NE(compile_error(deep).find("groups nested deeper than 100"), std::string::npos);
  const std::string ok = "root ::= " + std::string(50, '(') + "\"a\"" + std::string(50, ')') + "\n";
  EXPECT_EQ(compile_error(ok), "");
}

TEST(GrammarTest, LeftRecursionRefused) {
  EXPECT_EQ(compile_error("root ::= root \"a\" | \"b\"\n"),
            "line 1, column 1: the rule 'root' is left-recursive");
  EXPECT_EQ(compile_error("root ::= x\nx ::= [a]? y \"c\"\ny ::= x | \"b\"\n"),
            "line 2, column 1: the rule 'x' is left-recursive");
  EXPECT_EQ(compile_error("root ::= (\"a\"?)* \"b\"\n"),
            "line 1, column 1: the rule 'root' is left-recursive");
}

TEST(GrammarTest, CacheReturnsTheSameGrammar) {
  GrammarCache cache(2);
  auto a = cache.get("root ::= \"a\"\n");
  auto b = cache.get("root ::= \"a\"\n");
  ASSERT_TRUE(a.has_value() && b.has_value());
  EXPECT_EQ(a->get(), b->get());
  CompileOptions o;
  o.leading_newlines = 1;
  auto c = cache.get("root ::= \"a\"\n", o);
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(a->get(), c->get());
  EXPECT_FALSE(cache.get("root ::= b\n").has_value());
}

}  // namespace
}  // namespace ponder::grammar
