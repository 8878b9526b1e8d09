#include "text/nfc.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "base/check.h"

namespace ponder::text {

namespace {

const icu::Normalizer2* nfc_instance() {
  static const icu::Normalizer2* nfc = [] {
    UErrorCode ec = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(ec);
    PONDER_CHECK(U_SUCCESS(ec) && n != nullptr);
    return n;
  }();
  return nfc;
}

// Below U+0300 nothing composes with what precedes it, so text made only of such characters
// (all ASCII and Latin-1, encoded in bytes < 0xCC) is in NFC already.
bool trivially_nfc(std::string_view text) {
  for (char c : text) {
    if (static_cast<uint8_t>(c) >= 0xCC) return false;
  }
  return true;
}

}  // namespace

bool nfc_normalize(std::string_view text, std::string* out) {
  if (trivially_nfc(text)) return false;
  const icu::Normalizer2* nfc = nfc_instance();
  const icu::StringPiece sp(text.data(), static_cast<int32_t>(text.size()));
  UErrorCode ec = U_ZERO_ERROR;
  if (nfc->isNormalizedUTF8(sp, ec) && U_SUCCESS(ec)) return false;
  ec = U_ZERO_ERROR;
  std::string result;
  result.reserve(text.size());
  icu::StringByteSink<std::string> sink(&result);
  nfc->normalizeUTF8(0, sp, sink, nullptr, ec);
  if (U_FAILURE(ec)) return false;
  *out = std::move(result);
  return true;
}

}  // namespace ponder::text
