#include "text/stream_decoder.h"

#include <gtest/gtest.h>

#include "text/test_util.h"
#include "text/utf8.h"

namespace ponder::text {
namespace {

using testing::r1_tokenizer;

// Emoji, ZWJ sequences and CJK split across byte-level tokens: every chunk must be valid UTF-8
// and the chunks together must give the text back.
TEST(StreamDecoder, NeverEmitsBrokenUtf8) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  const std::vector<std::string> texts = {"🦙🚀 😶‍🌫️ 👩‍👩‍👧‍👦 ✅",
                                          "资料分享丨Agent开发中的坑与解（附18页PDF下载）",
                                          "កាន់តែពិសេសអាចខលចេញ", "𝕳𝖊𝖑𝖑𝖔 𠀀𠀁 🇯🇵", "plain ascii"};
  for (const std::string& text : texts) {
    const std::vector<int32_t> ids = tok->encode(text, false);
    StreamDecoder dec(*tok);
    std::string all;
    bool split_seen = false;  // some character was cut across tokens
    for (int32_t id : ids) {
      const std::string chunk = dec.feed(id);
      EXPECT_TRUE(is_valid_utf8(chunk)) << text;
      if (dec.pending() > 0) split_seen = true;
      all += chunk;
    }
    all += dec.flush();
    EXPECT_EQ(all, text);
    if (text.rfind("🦙", 0) == 0) {
      EXPECT_TRUE(split_seen) << "no character split in: " << text;
    }
  }
}

TEST(StreamDecoder, ControlTokensAreSilentUnlessAsked) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  StreamDecoder quiet(*tok);
  EXPECT_EQ(quiet.feed(tok->eos()), "");
  EXPECT_EQ(quiet.feed(151648), "<think>");  // USER_DEFINED tokens are text
  StreamDecoder loud(*tok, /*render_control=*/true);
  EXPECT_EQ(loud.feed(tok->eos()), "<｜end▁of▁sentence｜>");
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
  const Tokenizer* tok = r1_tokenizer();
  ASSERT_NE(tok, nullptr);
  StreamDecoder dec(*tok);
  EXPECT_EQ(dec.feed_bytes("a\xFF"
                           "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(dec.feed_bytes("\xE2\x82"), "");
  EXPECT_EQ(dec.pending(), 2u);
  EXPECT_EQ(dec.feed_bytes("\xAC!"), "€!");
  // A lead byte followed by a non-continuation: one U+FFFD for the maximal subpart.
  EXPECT_EQ(dec.feed_bytes("\xF0\x9F"
                           "x"),
            "\xEF\xBF\xBDx");
  // Surrogates and overlongs are never valid.
  EXPECT_EQ(dec.feed_bytes("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(dec.feed_bytes("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  // An unfinished character at the end.
  EXPECT_EQ(dec.feed_bytes("ok\xF0\x9F\x98"), "ok");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(dec.pending(), 0u);
  EXPECT_EQ(dec.flush(), "");
}

}  // namespace
}  // namespace ponder::text
