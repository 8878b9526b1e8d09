#include "runtime/reasoning_splitter.h"

#include <gtest/gtest.h>

namespace ponder {
namespace {

ReasoningSplitter::Parts feed_all(ReasoningSplitter& s, const std::vector<std::string>& pieces) {
  ReasoningSplitter::Parts all;
  for (const auto& p : pieces) {
    auto part = s.push(p);
    all.reasoning += part.reasoning;
    all.content += part.content;
  }
  auto last = s.flush();
  all.reasoning += last.reasoning;
  all.content += last.content;
  return all;
}

TEST(ReasoningSplitterTest, SplitsAtCloseMarkerEvenWhenSplitAcrossPieces) {
  const std::string text = "Let me think.\nSo 2+2=4.\n</think>\n\nThe answer is 4.";
  for (size_t cut1 = 1; cut1 < text.size(); cut1 += 3) {
    for (size_t cut2 = cut1 + 1; cut2 < text.size(); cut2 += 5) {
      ReasoningSplitter s(true);
      auto all =
          feed_all(s, {text.substr(0, cut1), text.substr(cut1, cut2 - cut1), text.substr(cut2)});
      ASSERT_EQ(all.reasoning, "Let me think.\nSo 2+2=4.\n") << cut1 << " " << cut2;
      ASSERT_EQ(all.content, "The answer is 4.") << cut1 << " " << cut2;
    }
  }
}

TEST(ReasoningSplitterTest, HoldsBackOnlyAPossibleMarkerPrefix) {
  ReasoningSplitter s(true);
  EXPECT_EQ(s.push("a < b </th").reasoning, "a < b ");
  EXPECT_EQ(s.push("ought").reasoning, "</thought");
  EXPECT_TRUE(s.in_thinking());
}

TEST(ReasoningSplitterTest, WithoutThinkingEverythingIsContent) {
  ReasoningSplitter s(false);
  auto all = feed_all(s, {"Hello ", "</think> world"});
  EXPECT_EQ(all.content, "Hello </think> world");
  EXPECT_EQ(all.reasoning, "");
}

TEST(ReasoningSplitterTest, UnfinishedThinkingIsFlushedAsReasoning) {
  ReasoningSplitter s(true);
  auto all = feed_all(s, {"still thinking </thi"});
  EXPECT_EQ(all.reasoning, "still thinking </thi");
  EXPECT_EQ(all.content, "");
}

}  // namespace
}  // namespace ponder
