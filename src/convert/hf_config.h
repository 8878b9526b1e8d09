// HfConfig: the hyperparameters of a Hugging Face Qwen2ForCausalLM folder's config.json, checked
// (only that architecture is accepted; anything else is refused by name). Optional fields stay
// unset when the file lacks them, so the GGUF gets only the keys the source has, as llama.cpp's
// converter does. Depends on base and nlohmann_json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"

namespace ponder {

struct HfConfig {
  std::string architecture;            // "Qwen2ForCausalLM"
  std::string name_or_path;            // "_name_or_path", may be empty
  int64_t n_embd = 0;                  // hidden_size
  int64_t n_ff = 0;                    // intermediate_size
  int64_t n_layer = 0;                 // num_hidden_layers
  int64_t n_head = 0;                  // num_attention_heads
  int64_t n_head_kv = 0;               // num_key_value_heads (defaults to n_head)
  std::optional<int64_t> n_ctx;        // max_position_embeddings
  std::optional<int64_t> n_vocab;      // vocab_size
  std::optional<double> rope_theta;    // rope_theta
  std::optional<double> rms_norm_eps;  // rms_norm_eps
  bool tie_word_embeddings = false;
  // rope_scaling of type "yarn" (the only scaling llama.cpp writes for Qwen2).
  std::optional<double> yarn_factor;
  std::optional<int64_t> yarn_orig_ctx;
  std::optional<int64_t> bos_token_id, eos_token_id, pad_token_id;  // fallbacks for the vocab

  int64_t head_dim() const { return n_embd / n_head; }
};

// Reads dir/config.json.
Expected<HfConfig> read_hf_config(const std::string& dir);

}  // namespace ponder
