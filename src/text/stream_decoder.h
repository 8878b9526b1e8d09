// StreamDecoder: turns generated token ids into text as they arrive, never emitting broken
// UTF-8. A token may end in the middle of a multi-byte character (byte-level BPE splits emoji
// and CJK characters across tokens); those bytes are held back until the character is complete.
// Bytes that can never become valid UTF-8 are replaced by U+FFFD at once; flush() replaces an
// unfinished character at the end the same way. CONTROL tokens (BOS, EOS) render as nothing
// unless asked for. Depends on text/tokenizer.h.
#pragma once

#include <cstdint>
#include <string>

#include "text/tokenizer.h"

namespace ponder::text {

class StreamDecoder {
 public:
  // The tokenizer must outlive the decoder.
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_control = false)
      : tokenizer_(&tokenizer), render_control_(render_control) {}

  // Adds one token; returns the text that became complete (possibly empty).
  std::string feed(int32_t id);
  // Returns what is held back (an unfinished character becomes U+FFFD) and resets.
  std::string flush();
  // Bytes held back, waiting for the rest of a character.
  size_t pending() const { return pending_.size(); }

  // The same for raw bytes (used by feed; public for tests and for callers with text pieces).
  std::string feed_bytes(std::string_view bytes);

 private:
  const Tokenizer* tokenizer_;
  bool render_control_;
  std::string pending_;
};

}  // namespace ponder::text
