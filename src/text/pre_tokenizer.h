// The Qwen2 pre-tokenizer: splits text into the pieces that byte-level BPE then encodes one by
// one. A hand-written equivalent of the split regex of the Qwen2 / DeepSeek-R1-Distill-Qwen
// tokenizer.json (leftmost match, alternatives tried in order, greedy with backtracking):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|
//   \s*[\r\n]+|\s+(?!\S)|\s+
// It is tested against PCRE2 running that regex. Invalid UTF-8 bytes count as [^\s\p{L}\p{N}].
// Depends on text/utf8.h only.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "text/utf8.h"

namespace ponder::text {

class PreTokenizer {
 public:
  // Appends the pieces of text to *pieces (they point into text). Not thread-safe: each thread
  // uses its own PreTokenizer (it only holds scratch space).
  void split(std::string_view text, std::vector<std::string_view>* pieces);

 private:
  struct Cp {
    uint32_t offset;  // byte offset in the text
    uint32_t cp;      // code point, kInvalidCodepoint for an invalid byte
    CharClass cls;
  };
  size_t match_at(size_t i) const;  // index one past the piece that starts at code point i

  std::vector<Cp> cps_;  // [n_cp + 1], the last one a sentinel at the end of the text
};

}  // namespace ponder::text
