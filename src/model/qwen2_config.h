// Qwen2Config: the hyperparameters of a Qwen2 model, read from a GGUF file's qwen2.* keys.
// Depends on gguf.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace ponder {

struct Qwen2Config {
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;  // n_embd / n_head
  int64_t n_ff = 0;
  int64_t n_ctx_train = 0;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;

  // Reads and checks the config; an architecture other than qwen2 is an error naming it.
  static Expected<Qwen2Config> from_gguf(const GgufFile& file);
  std::string summary() const;
};

}  // namespace ponder
