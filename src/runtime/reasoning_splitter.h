// ReasoningSplitter: splits DeepSeek-R1's streamed output into its thinking and its answer.
// R1's generation prompt opens "<think>\n", so output starts inside the thinking; everything up to
// "</think>" is reasoning, the rest is the answer. The marker may arrive split across pieces: text
// that could be its beginning is held back until the next piece decides.
// Depends on nothing but the standard library.
#pragma once

#include <string>
#include <string_view>

namespace ponder {

class ReasoningSplitter {
 public:
  // starts_in_thinking: the prompt ended inside <think> (R1 template); false: all is answer.
  explicit ReasoningSplitter(bool starts_in_thinking) : thinking_(starts_in_thinking) {}

  struct Parts {
    std::string reasoning;
    std::string content;
  };

  Parts push(std::string_view text);
  Parts flush();  // the held-back text, at the end of generation
  bool in_thinking() const { return thinking_; }

 private:
  bool thinking_;
  bool answer_started_ = false;
  std::string pending_;
};

}  // namespace ponder
