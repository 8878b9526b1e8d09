// `ponder convert`'s readers of a Hugging Face folder on arbitrary bytes: the first byte picks
// config.json or tokenizer.json (read with a plausible config), the rest is the file, written to
// a private folder under /dev/shm (else /tmp). Parsed or refused, never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "convert/hf_config.h"
#include "convert/hf_vocab.h"

namespace {

const std::string& folder() {
  static const std::string dir = [] {
    const std::string base = std::filesystem::exists("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string d = base + "/ponder-fuzz-hf-" + std::to_string(getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

void write(const std::string& name, const uint8_t* data, size_t size) {
  std::ofstream(folder() + "/" + name, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::error_code ec;
  std::filesystem::remove(folder() + "/tokenizer_config.json", ec);
  if ((data[0] & 1) == 0) {
    write("config.json", data + 1, size - 1);
    (void)ponder::read_hf_config(folder());
  } else {
    write("tokenizer.json", data + 1, size - 1);
    ponder::HfConfig config;
    config.n_vocab = 160;
    config.bos_token_id = 1;
    config.eos_token_id = 2;
    (void)ponder::read_hf_vocab(folder(), config);
  }
  return 0;
}
