#include "text/utf8.h"

#include <unicode/uchar.h>

#include <array>

namespace ponder::text {

namespace {

// Valid second-byte range for each lead byte (Unicode Table 3-7), so that overlongs, surrogates
// and code points above U+10FFFF are rejected at the second byte already.
inline bool second_byte_ok(uint8_t lead, uint8_t b) {
  switch (lead) {
    case 0xE0:
      return b >= 0xA0 && b <= 0xBF;
    case 0xED:
      return b >= 0x80 && b <= 0x9F;
    case 0xF0:
      return b >= 0x90 && b <= 0xBF;
    case 0xF4:
      return b >= 0x80 && b <= 0x8F;
    default:
      return b >= 0x80 && b <= 0xBF;
  }
}

inline bool is_cont(uint8_t b) { return (b & 0xC0) == 0x80; }

struct AsciiTable {
  std::array<CharClass, 128> cls;
  AsciiTable() {
    for (int c = 0; c < 128; ++c) {
      CharClass k = CharClass::kOther;
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
        k = CharClass::kLetter;
      else if (c >= '0' && c <= '9')
        k = CharClass::kNumber;
      else if ((c >= 0x09 && c <= 0x0D) || c == ' ')
        k = CharClass::kSpace;
      cls[c] = k;
    }
  }
};

const AsciiTable kAscii;

}  // namespace

uint32_t decode_utf8(const char* s, size_t n, size_t* len) {
  const auto* u = reinterpret_cast<const uint8_t*>(s);
  const uint8_t b0 = u[0];
  *len = 1;
  if (b0 < 0x80) return b0;
  const int need = utf8_sequence_length(b0);
  if (need == 0 || static_cast<size_t>(need) > n) return kInvalidCodepoint;
  if (!second_byte_ok(b0, u[1])) return kInvalidCodepoint;
  if (need == 2) {
    *len = 2;
    return ((b0 & 0x1Fu) << 6) | (u[1] & 0x3Fu);
  }
  if (!is_cont(u[2])) return kInvalidCodepoint;
  if (need == 3) {
    *len = 3;
    return ((b0 & 0x0Fu) << 12) | ((u[1] & 0x3Fu) << 6) | (u[2] & 0x3Fu);
  }
  if (!is_cont(u[3])) return kInvalidCodepoint;
  *len = 4;
  return ((b0 & 0x07u) << 18) | ((u[1] & 0x3Fu) << 12) | ((u[2] & 0x3Fu) << 6) | (u[3] & 0x3Fu);
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    if (decode_utf8(s.data() + i, s.size() - i, &len) == kInvalidCodepoint) return false;
    i += len;
  }
  return true;
}

size_t valid_utf8_prefix(std::string_view s, size_t* incomplete_tail) {
  *incomplete_tail = 0;
  const auto* u = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    if (u[i] < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    if (decode_utf8(s.data() + i, n - i, &len) != kInvalidCodepoint) {
      i += len;
      continue;
    }
    // Invalid, or valid so far but cut off by the end of s?
    const int need = utf8_sequence_length(u[i]);
    if (need != 0 && static_cast<size_t>(need) > n - i) {
      bool ok = true;
      for (size_t k = i + 1; k < n && ok; ++k) {
        ok = (k == i + 1) ? second_byte_ok(u[i], u[k]) : is_cont(u[k]);
      }
      if (ok) *incomplete_tail = n - i;
    }
    return i;
  }
  return n;
}

CharClass char_class(uint32_t cp) {
  if (cp < 0x80) return kAscii.cls[cp];
  if (cp == kInvalidCodepoint) return CharClass::kOther;
  if (cp == 0x85) return CharClass::kSpace;
  const uint32_t mask = U_GET_GC_MASK(static_cast<UChar32>(cp));
  if (mask & U_GC_L_MASK) return CharClass::kLetter;
  if (mask & U_GC_N_MASK) return CharClass::kNumber;
  if (mask & U_GC_Z_MASK) return CharClass::kSpace;
  return CharClass::kOther;
}

}  // namespace ponder::text
