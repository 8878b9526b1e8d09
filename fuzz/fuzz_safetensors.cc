// `ponder convert`'s safetensors reader on arbitrary bytes: parsed or refused, never a crash.
#include <cstddef>
#include <cstdint>

#include "convert/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)ponder::SafetensorsFile::parse(data, size, "fuzz.safetensors");
  return 0;
}
