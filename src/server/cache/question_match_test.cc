// --cache-match similar on a labelled set: paraphrases it must accept, and near misses (a changed
// number, a negation, another subject) it must refuse at the documented threshold.
#include "server/cache/question_match.h"

#include <gtest/gtest.h>

namespace ponder::server {
namespace {

TEST(QuestionMatchTest, NormalizedIgnoresCaseAndWhitespaceRuns) {
  EXPECT_EQ(normalize_question("  What IS\t the   capital\nof France?  "),
            "what is the capital of france?");
  EXPECT_NE(normalize_question("What is 2+2?"), normalize_question("What is 2+3?"));
}

TEST(QuestionMatchTest, SimilarAcceptsParaphrasesAndRefusesNearMisses) {
  const std::vector<std::pair<const char*, const char*>> same = {
      {"What is the capital of France?", "what is the capital of france"},
      {"What is the capital of France?", "Please, what is the capital of France?"},
      {"What is the capital of France?", "Hey, can you tell me: what is the capital of France?"},
      {"Explain how photosynthesis works.", "explain how photosynthesis works"},
      {"Explain how photosynthesis works", "How photosynthesis works, explain please"},
      {"Why is the sky blue?", "why is the sky blue??"},
      {"Translate 'good morning' into Spanish", "Please translate 'good morning' into Spanish."},
      {"What is 12 times 7?", "what is 12 times 7"},
      {"List three uses of copper", "Please list three uses of copper."},
  };
  const std::vector<std::pair<const char*, const char*>> different = {
      {"What is 2+2?", "What is 2+3?"},
      {"What is 12 times 7?", "What is 12 times 8?"},
      {"Is Paris in France?", "Is Paris not in France?"},
      {"Is the city of Paris located in France today?",
       "Is the city of Paris not located in France today?"},
      {"What is the capital of France?", "What is the capital of Germany?"},
      {"Why is the sky blue?", "Why is the sea blue?"},
      {"Explain how photosynthesis works", "Explain how respiration works"},
      {"How do I convert Celsius to Fahrenheit?", "How do I convert Fahrenheit to Kelvin?"},
      {"Write a poem about cats", "Write a story about cats"},
      {"What year did World War 2 end?", "What year did World War 1 end?"},
      {"Is it safe to eat raw eggs?", "Is it never safe to eat raw eggs?"},
      {"Summarize the plot of Hamlet", "Summarize the plot of Macbeth"},
  };
  for (const auto& [a, b] : same)
    EXPECT_TRUE(compare_questions(a, b).accepted())
        << a << " | " << b << " " << compare_questions(a, b).jaccard;
  for (const auto& [a, b] : different)
    EXPECT_FALSE(compare_questions(a, b).accepted())
        << a << " | " << b << " " << compare_questions(a, b).jaccard;
}

}  // namespace
}  // namespace ponder::server
