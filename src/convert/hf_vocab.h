// HfVocab: the tokenizer of a Hugging Face folder (tokenizer.json + tokenizer_config.json, with
// config.json's ids as fallbacks) in the layout llama.cpp's converter writes to GGUF for a
// byte-level BPE ("gpt2") model: every id below vocab_size gets a token ("[PAD<id>]", UNUSED,
// where the tokenizer has none), added tokens are CONTROL when `special`, else USER_DEFINED,
// merges are "left right" strings, special ids are found by their content among the added tokens.
// Only the Qwen2 split (Qwen2, Qwen2.5, Qwen3, DeepSeek-R1-Distill-Qwen) is accepted.
// Depends on base, gguf (the writer) and nlohmann_json.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "convert/hf_config.h"
#include "gguf/gguf_writer.h"

namespace ponder {

// The Qwen2 pre-tokenizer split regex, as tokenizer.json spells it.
extern const char* const kQwen2SplitRegex;

struct HfVocab {
  std::string pre;                   // "deepseek-r1-qwen" or "qwen2"
  std::vector<std::string> tokens;   // [n_vocab]
  std::vector<int32_t> token_types;  // [n_vocab] 1 normal, 3 control, 4 user-defined, 5 unused
  std::vector<std::string> merges;   // in rank order
  std::vector<std::pair<std::string, uint32_t>> special_ids;  // GGUF key -> id, in llama.cpp order
  std::vector<std::pair<std::string, bool>> add_flags;        // add_bos_token, add_eos_token
  std::optional<std::string> chat_template;
  std::vector<std::pair<std::string, std::string>> named_templates;  // tokenizer.chat_template.NAME

  // Appends the tokenizer.* keys to `w` in llama.cpp's order.
  void add_to(GgufWriter& w) const;
};

// Reads dir/tokenizer.json and dir/tokenizer_config.json (optional). The vocabulary is padded to
// config.n_vocab when it is set; an id at or past it is an error.
Expected<HfVocab> read_hf_vocab(const std::string& dir, const HfConfig& config);

}  // namespace ponder
