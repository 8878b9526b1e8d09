#include "text/stream_decoder.h"

#include "text/utf8.h"

namespace ponder::text {

namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

std::string StreamDecoder::feed(int32_t id) {
  if (!render_control_ && tokenizer_->is_control(id)) return {};
  return feed_bytes(tokenizer_->token_to_bytes(id));
}

std::string StreamDecoder::feed_bytes(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    size_t tail = 0;
    const std::string_view rest(pending_.data() + pos, pending_.size() - pos);
    const size_t ok = valid_utf8_prefix(rest, &tail);
    out.append(rest.substr(0, ok));
    pos += ok;
    if (pos == pending_.size() || tail != 0) break;  // done, or waiting for continuation bytes
    // An ill-formed sequence: its maximal valid prefix (at least one byte) becomes one U+FFFD.
    size_t bad = 1;
    const int need = utf8_sequence_length(static_cast<uint8_t>(pending_[pos]));
    if (need > 1) {
      size_t t = 0;
      for (size_t k = 2; k < static_cast<size_t>(need) && pos + k <= pending_.size(); ++k) {
        if (valid_utf8_prefix(std::string_view(pending_.data() + pos, k), &t) == 0 && t == k) {
          bad = k;
        }
      }
    }
    out.append(kReplacement);
    pos += bad;
  }
  pending_.erase(0, pos);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = pending_.empty() ? std::string() : std::string(kReplacement);
  pending_.clear();
  return out;
}

}  // namespace ponder::text
