// StopStrings: finds stop strings in streamed text, also when one is split across tokens, and
// says how much of the text is safe to send to the client now. Text that could be the beginning
// of a stop string is held back until the next piece decides it; text from a stop string on is
// never emitted. Works on bytes: give it whole UTF-8 characters (the detokenizer's job) and the
// emitted text is whole characters too, since a held-back suffix starts where a stop string's
// first character does.
// Depends on nothing but the standard library.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace ponder {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops);  // empty strings are ignored

  // Appends the text of the next token and returns what may be emitted now (valid until the next
  // call). Once a stop string is found, returns the text before it and stopped() is true; further
  // pushes return nothing.
  std::string_view push(std::string_view piece);

  // Generation ended for another reason (end of sequence, length): the held-back text, which is
  // not a stop string after all.
  std::string_view flush();

  bool stopped() const { return stop_index_ >= 0; }
  // Which stop string matched (index into the constructor's list), -1 if none.
  int stop_index() const { return stop_index_; }
  const std::string& stop_string() const;
  // Bytes currently held back.
  size_t held() const { return pending_.size(); }

 private:
  std::vector<std::string> stops_;
  std::vector<int> original_index_;
  std::string pending_;  // text not yet emitted
  std::string out_;      // what the last call returned
  int stop_index_ = -1;
};

}  // namespace ponder
