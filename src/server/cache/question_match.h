// How the response cache compares questions when asked to (--cache-match), as pure logic:
//   normalized  case and runs of whitespace ignored (and the whitespace at both ends);
//   similar     the same content words, whatever their order, case, punctuation, and filler
//               words ("please", "the", "hey", ...): token-set Jaccard similarity of the content
//               words >= kSimilarThreshold, and never when the numbers or the negations differ
//               (a changed number, or a "not", is a different question).
// Depends on nothing but the standard library.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace ponder::server {

enum class CacheMatch { kExact, kNormalized, kSimilar };

inline constexpr double kSimilarThreshold = 0.9;

// Lowercase (ASCII), whitespace runs as one space, trimmed.
std::string normalize_question(std::string_view text);
// Lowercase words of letters and digits (apostrophes kept inside words), punctuation dropped.
std::vector<std::string> question_words(std::string_view text);

struct QuestionSimilarity {
  double jaccard = 0;           // of the content words (fillers removed)
  bool same_numbers = false;    // the same numbers, as a multiset
  bool same_negations = false;  // the same negation words
  bool accepted() const { return same_numbers && same_negations && jaccard >= kSimilarThreshold; }
};
QuestionSimilarity compare_questions(std::string_view a, std::string_view b);

}  // namespace ponder::server
