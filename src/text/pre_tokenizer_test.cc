#include "text/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "text/test_util.h"
#include "text/utf8.h"

namespace ponder::text {
namespace {

// The split regex of the Qwen2 tokenizer.json, run by PCRE2 (UTF + UCP): the reference.
class RegexSplitter {
 public:
  RegexSplitter() {
    const char* pattern =
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+"
        "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    EXPECT_NE(code_, nullptr) << "pcre2_compile error " << err << " at " << off;
    data_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  ~RegexSplitter() {
    pcre2_match_data_free(data_);
    pcre2_code_free(code_);
  }
  std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos < text.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                                 0, data_, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
      if (ov[0] > pos) out.push_back("<unmatched>" + text.substr(pos, ov[0] - pos));
      out.push_back(text.substr(ov[0], ov[1] - ov[0]));
      pos = ov[1];
    }
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* data_ = nullptr;
};

std::vector<std::string> hand_split(const std::string& text) {
  PreTokenizer pre;
  std::vector<std::string_view> pieces;
  pre.split(text, &pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(PreTokenizer, Examples) {
  EXPECT_EQ(hand_split("Hello world"), (std::vector<std::string>{"Hello", " world"}));
  EXPECT_EQ(hand_split("I'm   fine!!\n\n  ok"),
            (std::vector<std::string>{"I", "'m", "  ", " fine", "!!\n\n", " ", " ok"}));
  EXPECT_EQ(hand_split("1234"), (std::vector<std::string>{"1", "2", "3", "4"}));
  EXPECT_EQ(hand_split("a  "), (std::vector<std::string>{"a", "  "}));
  EXPECT_EQ(hand_split(""), std::vector<std::string>{});
}

TEST(PreTokenizer, MatchesRegexOnTestTexts) {
  RegexSplitter re;
  std::ifstream f(testing::shared_path("tokenizer/cases.jsonl"));
  int n = 0;
  for (std::string line; std::getline(f, line);) {
    if (line.empty()) continue;
    const std::string text = nlohmann::json::parse(line).at("text").get<std::string>();
    EXPECT_EQ(hand_split(text), re.split(text)) << text;
    ++n;
  }
  EXPECT_GT(n, 100);
}

// Random strings over an alphabet that exercises every alternative and class boundary.
TEST(PreTokenizer, MatchesRegexOnRandomText) {
  RegexSplitter re;
  const std::vector<std::string> alphabet = {"a",
                                             "Z",
                                             "s",
                                             "S",
                                             "t",
                                             "r",
                                             "e",
                                             "v",
                                             "m",
                                             "l",
                                             "d",
                                             "'",
                                             "1",
                                             "٣",
                                             "Ⅻ",
                                             "½",
                                             " ",
                                             " ",
                                             "\t",
                                             "\n",
                                             "\r",
                                             "\v",
                                             "\f",
                                             "\xC2\x85",
                                             "\xC2\xA0",
                                             "\xE3\x80\x80",
                                             "\xE2\x80\xA8",
                                             "\xE2\x80\x8B",
                                             "!",
                                             ".",
                                             "?",
                                             "-",
                                             "(",
                                             "资",
                                             "料",
                                             "ſ",
                                             "é",
                                             "\xCC\x81",
                                             "🦙",
                                             "😀",
                                             "\xE2\x80\x8D",
                                             "_",
                                             "/",
                                             "ا",
                                             "ก",
                                             "\xE0\xB8\xB1",
                                             "\xE1\x9A\x80",
                                             "\xE2\x80\xAF"};
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int k = 0; k < n; ++k) text += alphabet[rng() % alphabet.size()];
    const auto expected = re.split(text);
    const auto got = hand_split(text);
    ASSERT_EQ(got, expected) << nlohmann::json(text).dump();
  }
}

TEST(PreTokenizer, KeepsInvalidBytes) {
  const std::string bad = "ab\xFF\xFE cd\xC3";
  std::string joined;
  for (const std::string& p : hand_split(bad)) joined += p;
  EXPECT_EQ(joined, bad);
}

}  // namespace
}  // namespace ponder::text
