// The GGUF reader on arbitrary bytes, then the tokenizer and chat template bound on top of it:
// any input is parsed or refused with a Status, never a crash, a sanitizer report or an
// allocation beyond the bound.
#include <cstddef>
#include <cstdint>

#include "gguf/gguf_file.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = ponder::GgufFile::parse(data, size, "fuzz.gguf");
  if (!file.has_value()) return 0;
  auto tok = ponder::text::Tokenizer::from_gguf(*file);
  if (tok.has_value()) {
    const auto ids = tok->encode("Hello <|im_start|> world 123", true);
    for (int32_t id : ids) (void)tok->token_to_bytes(id);
  }
  (void)ponder::text::ChatTemplate::for_model(*file, "");
  return 0;
}
