#include "text/byte_level.h"

#include <array>

#include "text/utf8.h"

namespace ponder::text {

namespace {

struct Alphabet {
  std::array<uint32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};  // every code point of the alphabet is below 256 + 68
  Alphabet() {
    to_byte.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet kAlphabet;

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return kAlphabet.to_cp[b]; }

int codepoint_to_byte(uint32_t cp) {
  return cp < kAlphabet.to_byte.size() ? kAlphabet.to_byte[cp] : -1;
}

bool byte_level_decode(std::string_view piece, std::string* out) {
  size_t i = 0;
  while (i < piece.size()) {
    size_t len = 0;
    const uint32_t cp = decode_utf8(piece.data() + i, piece.size() - i, &len);
    const int b = codepoint_to_byte(cp);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
    i += len;
  }
  return true;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_to_codepoint(static_cast<uint8_t>(c)), out);
  return out;
}

}  // namespace ponder::text
