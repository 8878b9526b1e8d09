#include "server/cache/question_match.h"

#include <algorithm>
#include <cctype>

namespace ponder::server {

namespace {

bool is_filler(const std::string& w) {
  static const std::set<std::string> kFillers = {
      "a",      "an",    "the",      "please", "pls",    "kindly", "hey",   "hi",   "hello",
      "thanks", "thank", "you",      "me",     "can",    "could",  "would", "tell", "so",
      "just",   "quick", "question", "i",      "wonder", "um",     "ok",    "okay"};
  return kFillers.count(w) > 0;
}

bool is_number(const std::string& w) {
  return !w.empty() && std::any_of(w.begin(), w.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c));
  });
}

bool is_negation(const std::string& w) {
  static const std::set<std::string> kNegations = {
      "not",     "no",    "never",  "none",  "nor",    "without", "isn't", "aren't",
      "doesn't", "don't", "didn't", "can't", "cannot", "won't",   "wasn't"};
  return kNegations.count(w) > 0;
}

}  // namespace

std::string normalize_question(std::string_view text) {
  std::string out;
  bool space = false;
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isspace(c)) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += static_cast<char>(std::tolower(c));
  }
  return out;
}

std::vector<std::string> question_words(std::string_view text) {
  std::vector<std::string> words;
  std::string w;
  auto flush = [&] {
    while (!w.empty() && w.back() == '\'') w.pop_back();
    if (!w.empty()) words.push_back(w);
    w.clear();
  };
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80 || (c == '\'' && !w.empty()) ||
        (c == '.' && !w.empty() && std::isdigit(static_cast<unsigned char>(w.back())))) {
      w += static_cast<char>(std::tolower(c));
    } else {
      flush();
    }
  }
  flush();
  for (std::string& x : words) {
    while (!x.empty() && x.back() == '.') x.pop_back();  // "3." at the end of a sentence is 3
  }
  return words;
}

QuestionSimilarity compare_questions(std::string_view a, std::string_view b) {
  const std::vector<std::string> wa = question_words(a), wb = question_words(b);
  std::set<std::string> ca, cb;
  std::multiset<std::string> na, nb;
  std::set<std::string> ga, gb;
  for (const std::string& w : wa) {
    if (is_number(w)) na.insert(w);
    if (is_negation(w)) ga.insert(w);
    if (!is_filler(w)) ca.insert(w);
  }
  for (const std::string& w : wb) {
    if (is_number(w)) nb.insert(w);
    if (is_negation(w)) gb.insert(w);
    if (!is_filler(w)) cb.insert(w);
  }
  QuestionSimilarity s;
  s.same_numbers = na == nb;
  s.same_negations = ga == gb;
  size_t inter = 0;
  for (const std::string& w : ca) inter += cb.count(w);
  const size_t uni = ca.size() + cb.size() - inter;
  s.jaccard = uni == 0 ? 1.0 : static_cast<double>(inter) / static_cast<double>(uni);
  return s;
}

}  // namespace ponder::server
