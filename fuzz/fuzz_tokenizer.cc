// The tokenizer on arbitrary bytes: encode never fails, every id is in the vocabulary, and
// decode(encode(x)) == NFC(x) whenever special tokens are not parsed (byte-level BPE is lossless
// after the Qwen2 tokenizer's NFC normaliser; ill-formed UTF-8 passes through it unchanged).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "fuzz/fuzz_common.h"
#include "text/nfc.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const ponder::text::Tokenizer& tok = ponder::fuzz::tokenizer();
  const bool special = (data[0] & 1) != 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<int32_t> ids = tok.encode(text, special);
  std::string back;
  for (int32_t id : ids) {
    if (id < 0 || id >= tok.n_vocab()) std::abort();
    back += tok.token_to_bytes(id);
  }
  std::string normalized = text;
  ponder::text::nfc_normalize(text, &normalized);
  if (!special && back != normalized) std::abort();  // lossless
  return 0;
}
