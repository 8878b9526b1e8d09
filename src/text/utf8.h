// UTF-8 helpers for the text layer: strict decoding of one code point (no overlongs, no
// surrogates, nothing above U+10FFFF) and the classes the Qwen2 split regex needs (\p{L}, \p{N},
// \s). Invalid bytes are reported as kInvalidCodepoint, one byte at a time, so that callers keep
// the raw bytes (byte-level BPE can encode any byte).
// Depends on ICU (character properties) only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ponder::text {

inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFFu;

// Decodes the code point at s[0..n) (n >= 1). Sets *len to the bytes consumed (1 for an invalid
// byte). Returns kInvalidCodepoint for an ill-formed or truncated sequence.
uint32_t decode_utf8(const char* s, size_t n, size_t* len);

// Appends the UTF-8 encoding of cp (cp <= U+10FFFF, not a surrogate).
void append_utf8(uint32_t cp, std::string& out);

bool is_valid_utf8(std::string_view s);

// The length of the longest prefix of s that is complete and valid UTF-8, given that more bytes
// may follow: an incomplete but so-far-valid sequence at the end is not part of the prefix, and
// *incomplete_tail is set to its length (0 when the prefix ends at an invalid byte or at the end).
size_t valid_utf8_prefix(std::string_view s, size_t* incomplete_tail);

// Number of bytes (2..4) that a lead byte announces, 0 when b is not a lead byte (ASCII -> 1).
inline int utf8_sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Character classes of the split regex. kOther is everything else, including invalid bytes.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };

// \s as Oniguruma (the Hugging Face tokenizers regex engine) defines it for Unicode:
// U+0009..U+000D, U+0085 and the categories Zs, Zl, Zp.
CharClass char_class(uint32_t cp);

}  // namespace ponder::text
