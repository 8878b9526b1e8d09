// Token masks: the sorted-vocabulary walk gives exactly the tokens whose bytes the grammar
// accepts from a state (checked against a token-by-token reference on random vocabularies),
// end of sequence is the matcher's accepting(), and a Matcher survives the memo being dropped.
#include "grammar/token_mask.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/program.h"

namespace ponder::grammar {
namespace {

bool allowed(const std::vector<uint64_t>& m, int32_t t) {
  return (m[static_cast<size_t>(t) >> 6] >> (t & 63)) & 1;
}

std::shared_ptr<const Vocabulary> random_vocab(uint32_t seed, int n) {
  std::mt19937 rng(seed);
  const std::string alphabet = "{}[]\":, \n\tab01-.e\\u\xC3\xA9";
  std::vector<std::string> tokens;
  tokens.push_back("");  // a control token: never allowed
  for (int i = 1; i < n; ++i) {
    std::string t;
    const int len = 1 + static_cast<int>(rng() % 5);
    for (int k = 0; k < len; ++k) t.push_back(alphabet[rng() % alphabet.size()]);
    tokens.push_back(t);
  }
  return std::make_shared<Vocabulary>(std::move(tokens));
}

const char* kJsonish = R"(root ::= value
value ::= object | array | string | number | ("true" | "false" | "null")
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}"
array ::= "[" ws ( value ("," ws value)* )? "]"
string ::= "\"" ( [^"\\\x00-\x1F] | "\\" ["\\/bfnrt] )* "\""
number ::= "-"? [0-9]+ ("." [0-9]+)?
ws ::= [ \n]?
)";

TEST(TokenMaskTest, MaskIsExactlyTheAcceptedTokens) {
  auto g = Grammar::compile(kJsonish);
  ASSERT_TRUE(g.has_value()) << g.status().message();
  for (uint32_t seed : {1u, 2u, 3u}) {
    auto vocab = random_vocab(seed, 3000);
    Matcher m(*g, vocab);
    std::mt19937 rng(seed * 7);
    // Walk a random path through the grammar, checking the mask at every step.
    for (int step = 0; step < 40; ++step) {
      auto mask = m.allowed();
      std::vector<int32_t> ok;
      for (int32_t t = 0; t < vocab->n_vocab(); ++t) {
        const bool want =
            !vocab->bytes(t).empty() && (*g)->accepts_prefix(m.consumed() + vocab->bytes(t));
        ASSERT_EQ(allowed(*mask, t), want)
            << "token '" << vocab->bytes(t) << "' after '" << m.consumed() << "'";
        if (want) ok.push_back(t);
      }
      EXPECT_EQ(m.accepting(), (*g)->accepts(m.consumed()));
      if (ok.empty()) break;
      ASSERT_TRUE(m.accept_token(ok[rng() % ok.size()]));
    }
  }
}

TEST(TokenMaskTest, RefusedTokenChangesNothing) {
  auto g = Grammar::compile("root ::= \"ab\" \"c\"*\n");
  ASSERT_TRUE(g.has_value());
  auto vocab =
      std::make_shared<Vocabulary>(std::vector<std::string>{"a", "b", "ab", "c", "cc", "x", ""});
  Matcher m(*g, vocab);
  EXPECT_FALSE(m.accept_token(1));
  EXPECT_FALSE(m.accept_token(6));  // empty: a control token
  EXPECT_FALSE(m.accepting());
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.accepting());
  EXPECT_FALSE(m.complete());  // more c may come
  EXPECT_TRUE(m.accept_token(4));
  EXPECT_EQ(m.consumed(), "abcc");
  auto mask = m.allowed();
  EXPECT_TRUE(allowed(*mask, 3));
  EXPECT_TRUE(allowed(*mask, 4));
  EXPECT_FALSE(allowed(*mask, 0));
}

TEST(TokenMaskTest, CompleteWhenNothingCanFollow) {
  auto g = Grammar::compile("root ::= \"done\"\n");
  ASSERT_TRUE(g.has_value());
  auto vocab = std::make_shared<Vocabulary>(std::vector<std::string>{"do", "ne", "done"});
  Matcher m(*g, vocab);
  EXPECT_TRUE(m.accept_token(0));
  EXPECT_FALSE(m.complete());
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.complete());
  auto mask = m.allowed();
  for (int32_t t = 0; t < 3; ++t) EXPECT_FALSE(allowed(*mask, t));
}

TEST(TokenMaskTest, MatchersReplayAfterTheMemoIsDropped) {
  // Many distinct states (counters up to 9999) push the memo past its bound; matchers created
  // before keep their place.
  auto g = Grammar::compile("root ::= [a]{0,9999} [b]{0,9999} [c]{0,9999} [d]{0,9999} \"!\"\n");
  ASSERT_TRUE(g.has_value()) << g.status().message();
  auto vocab =
      std::make_shared<Vocabulary>(std::vector<std::string>{"a", "!", "aa", "b", "c", "d"});
  Matcher early(*g, vocab);
  ASSERT_TRUE(early.accept_token(2));
  Matcher m(*g, vocab);
  const uint64_t gen0 = (*g)->program().generation();
  for (int i = 0; i < 35000; ++i)
    ASSERT_TRUE(m.accept_token(i < 9999 ? 0 : i < 19998 ? 3 : i < 29997 ? 4 : 5)) << i;
  EXPECT_NE((*g)->program().generation(), gen0);
  EXPECT_TRUE(early.accept_token(1));
  EXPECT_TRUE(early.accepting());
  EXPECT_EQ(early.consumed(), "aa!");
  EXPECT_TRUE(m.accept_token(1));
  EXPECT_TRUE(m.complete());
}

}  // namespace
}  // namespace ponder::grammar
