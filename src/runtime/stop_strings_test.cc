#include "runtime/stop_strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ponder {
namespace {

// Pushes the pieces and returns everything emitted, flushing at the end if no stop matched.
std::string run(StopStrings& s, const std::vector<std::string>& pieces,
                std::vector<std::string>* emitted = nullptr) {
  std::string out;
  for (const std::string& piece : pieces) {
    const std::string_view e = s.push(piece);
    if (emitted) emitted->emplace_back(e);
    out += e;
  }
  if (!s.stopped()) out += s.flush();
  return out;
}

TEST(StopStrings, NoStopsEmitsEverythingAtOnce) {
  StopStrings s({});
  EXPECT_EQ(s.push("Hello"), "Hello");
  EXPECT_EQ(s.push(", world"), ", world");
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.flush(), "");
}

TEST(StopStrings, StopSplitAcrossTokens) {
  StopStrings s({"</answer>"});
  std::vector<std::string> emitted;
  EXPECT_EQ(run(s, {"The answer is 4", ".</", "ans", "wer", ">", " more"}, &emitted),
            "The answer is 4.");
  EXPECT_EQ(emitted, (std::vector<std::string>{"The answer is 4", ".", "", "", "", ""}));
  EXPECT_TRUE(s.stopped());
  EXPECT_EQ(s.stop_index(), 0);
  EXPECT_EQ(s.stop_string(), "</answer>");
}

TEST(StopStrings, HeldBackTextIsReleasedWhenItIsNotAStop) {
  StopStrings s({"STOP"});
  EXPECT_EQ(s.push("go ST"), "go ");
  EXPECT_EQ(s.held(), 2u);
  EXPECT_EQ(s.push("O"), "");
  EXPECT_EQ(s.push("RM"), "STORM");
  EXPECT_EQ(s.push("ST"), "");
  EXPECT_EQ(s.flush(), "ST");  // the end came first: it was text after all
  EXPECT_FALSE(s.stopped());
}

TEST(StopStrings, OverlappingPrefixes) {
  StopStrings s({"abc"});
  EXPECT_EQ(s.push("xaab"), "xa");  // "ab" might start "abc"; the first "a" cannot any more
  EXPECT_EQ(s.push("c tail"), "");
  EXPECT_TRUE(s.stopped());

  StopStrings t({"aab"});
  EXPECT_EQ(run(t, {"a", "a", "a", "b", "!"}), "a");
}

TEST(StopStrings, EarliestStopWinsAndReportsItsIndex) {
  StopStrings s({"", "world", "lo w"});
  EXPECT_EQ(s.push("hello world"), "hel");
  EXPECT_EQ(s.stop_index(), 2);
  EXPECT_EQ(s.stop_string(), "lo w");
  EXPECT_EQ(s.push("more"), "");
}

TEST(StopStrings, StopInsideOnePiece) {
  StopStrings s({"\n\n"});
  EXPECT_EQ(s.push("line one\n\nline two"), "line one");
  EXPECT_TRUE(s.stopped());
}

TEST(StopStrings, MultiByteStopHoldsWholeCharacters) {
  StopStrings s({"。\n"});
  EXPECT_EQ(s.push("答案是4"), "答案是4");
  EXPECT_EQ(s.push("。"), "");  // could be the start of the stop
  EXPECT_EQ(s.push("好"), "。好");
  EXPECT_EQ(s.push("。\n后"), "");
  EXPECT_TRUE(s.stopped());
}

TEST(StopStrings, ThinkingEndMarker) {
  // DeepSeek-R1 ends its reasoning with "</think>"; tokenizers split it in many ways.
  StopStrings s({"</think>"});
  EXPECT_EQ(run(s, {"so x = 2", "<", "/", "think", ">\n\nx = 2"}), "so x = 2");
}

}  // namespace
}  // namespace ponder
