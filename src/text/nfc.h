// NFC normalisation (ICU Normalizer2), as the Hugging Face normaliser of the Qwen2 tokenizer
// applies it before splitting. Depends on ICU only.
#pragma once

#include <string>
#include <string_view>

namespace ponder::text {

// Returns true and writes the NFC form of text to *out when it differs from text; returns false
// (out untouched) when text is already in NFC, which is the common case and costs one scan.
// Ill-formed UTF-8 is passed through as it is.
bool nfc_normalize(std::string_view text, std::string* out);

}  // namespace ponder::text
