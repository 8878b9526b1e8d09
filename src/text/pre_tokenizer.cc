#include "text/pre_tokenizer.h"

namespace ponder::text {

namespace {

// Simple case folding for the contraction alternative; U+017F (long s) folds to 's'.
inline uint32_t fold(uint32_t cp) {
  if (cp >= 'A' && cp <= 'Z') return cp + 32;
  if (cp == 0x17F) return 's';
  return cp;
}

inline bool is_newline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>* pieces) {
  cps_.clear();
  cps_.reserve(text.size() + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 1;
    const uint8_t b = static_cast<uint8_t>(text[pos]);
    const uint32_t cp = b < 0x80 ? b : decode_utf8(text.data() + pos, text.size() - pos, &len);
    cps_.push_back({static_cast<uint32_t>(pos), cp, char_class(cp)});
    pos += len;
  }
  const size_t n = cps_.size();
  cps_.push_back({static_cast<uint32_t>(text.size()), 0, CharClass::kSpace});

  size_t i = 0;
  while (i < n) {
    const size_t j = match_at(i);
    pieces->push_back(text.substr(cps_[i].offset, cps_[j].offset - cps_[i].offset));
    i = j;
  }
}

size_t PreTokenizer::match_at(size_t i) const {
  const size_t n = cps_.size() - 1;
  const Cp* c = cps_.data();
  // Past the end counts as whitespace: it neither extends a letter run nor a punctuation run.
  auto cls = [&](size_t k) { return k < n ? c[k].cls : CharClass::kSpace; };

  // (?i:'s|'t|'re|'ve|'m|'ll|'d)
  if (c[i].cp == '\'' && i + 1 < n) {
    const uint32_t a = fold(c[i + 1].cp);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 < n) {
      const uint32_t b = fold(c[i + 2].cp);
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
  }
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c[i].cls == CharClass::kLetter || (c[i].cls != CharClass::kNumber && !is_newline(c[i].cp) &&
                                         cls(i + 1) == CharClass::kLetter)) {
    size_t j = i + 1;
    while (j < n && c[j].cls == CharClass::kLetter) ++j;
    return j;
  }
  // \p{N}
  if (c[i].cls == CharClass::kNumber) return i + 1;
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  size_t k = i;
  if (c[i].cp == ' ' && cls(i + 1) == CharClass::kOther) k = i + 1;
  if (c[k].cls == CharClass::kOther) {
    size_t j = k + 1;
    while (j < n && c[j].cls == CharClass::kOther) ++j;
    while (j < n && is_newline(c[j].cp)) ++j;
    return j;
  }
  // Here c[i] is whitespace. \s*[\r\n]+ ends after the last newline of the whitespace run;
  // \s+(?!\S) takes the run but its last character unless the run ends the text; \s+ the rest.
  size_t j = i;
  size_t after_newline = 0;
  while (j < n && c[j].cls == CharClass::kSpace) {
    if (is_newline(c[j].cp)) after_newline = j + 1;
    ++j;
  }
  if (after_newline != 0) return after_newline;
  if (j == n || j - i == 1) return j;
  return j - 1;
}

}  // namespace ponder::text
