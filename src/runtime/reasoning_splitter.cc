#include "runtime/reasoning_splitter.h"

#include <algorithm>

namespace ponder {
namespace {

constexpr std::string_view kClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `marker`.
size_t partial_suffix(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningSplitter::Parts ReasoningSplitter::push(std::string_view text) {
  Parts out;
  if (!thinking_) {
    // The answer usually opens with the blank lines that close the thinking: drop them.
    if (!answer_started_) {
      const size_t skip = std::min(text.find_first_not_of('\n'), text.size());
      text.remove_prefix(skip);
      answer_started_ = !text.empty();
    }
    out.content.assign(text);
    return out;
  }
  pending_.append(text);
  const size_t at = pending_.find(kClose);
  if (at == std::string::npos) {
    const size_t keep = partial_suffix(pending_, kClose);
    out.reasoning.assign(pending_, 0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }
  out.reasoning.assign(pending_, 0, at);
  const std::string rest = pending_.substr(at + kClose.size());
  pending_.clear();
  thinking_ = false;
  out.content = push(rest).content;
  return out;
}

ReasoningSplitter::Parts ReasoningSplitter::flush() {
  Parts out;
  out.reasoning = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace ponder
