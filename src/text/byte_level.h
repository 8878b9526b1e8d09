// The GPT-2 byte-level alphabet: each of the 256 byte values is written as one printable code
// point in vocabulary strings (printable Latin-1 bytes as themselves, the others as U+0100 + n),
// so "Ġ" (U+0120) is the space byte. Depends on nothing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ponder::text {

// The code point that stands for byte b.
uint32_t byte_to_codepoint(uint8_t b);

// The byte that code point cp stands for, or -1 when cp is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

// Decodes a vocabulary string into raw bytes. Returns false (and leaves *out partly written)
// when it contains a character outside the alphabet.
bool byte_level_decode(std::string_view piece, std::string* out);

// Encodes raw bytes into a vocabulary string.
std::string byte_level_encode(std::string_view bytes);

}  // namespace ponder::text
