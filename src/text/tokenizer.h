// Tokenizer: the byte-level BPE tokenizer of Qwen2 / DeepSeek-R1-Distill-Qwen, loaded from the
// `tokenizer.ggml.*` keys of a GGUF file. Encoding follows the Hugging Face tokenizer:
//   1. added tokens (CONTROL and USER_DEFINED, e.g. <think>, <｜User｜>) are cut out of the text,
//      only when the caller asks for it (parse_special);
//   2. each stretch of text between them is NFC-normalised and split by the Qwen2 pre-tokenizer;
//   3. each piece is encoded as bytes and merged by BPE merge rank (lowest rank first, leftmost
//      first on ties).
// Thread-safe after construction: encode() keeps its scratch space per thread.
// Depends on base, gguf and ICU; nothing above the text layer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "text/merge_table.h"
#include "text/token_index.h"

namespace ponder::text {

// tokenizer.ggml.token_type values.
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

class Tokenizer {
 public:
  // Reads tokenizer.ggml.{model,pre,tokens,token_type,merges,bos_token_id,eos_token_id,
  // padding_token_id,add_bos_token,add_eos_token}. Only model "gpt2" with the Qwen2 split
  // (pre "qwen2" or "deepseek-r1-qwen") is supported; anything else is an error naming the value.
  static Expected<Tokenizer> from_gguf(const GgufFile& file);

  // The same from plain vectors (tests, and `ponder convert`). token_types may be empty (all
  // normal). merges are "left right" in vocabulary strings, in rank order.
  struct Vocab {
    std::vector<std::string> tokens;
    std::vector<int32_t> token_types;
    std::vector<std::string> merges;
    int32_t bos = -1;
    int32_t eos = -1;
    int32_t pad = -1;
    bool add_bos = false;
    bool add_eos = false;
  };
  static Expected<Tokenizer> from_vocab(Vocab vocab);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of text, without BOS/EOS. With parse_special, added tokens written in the text
  // (e.g. "<think>") become their ids; without it they are ordinary text.
  std::vector<int32_t> encode(std::string_view text, bool parse_special) const;
  // Appends instead of returning (the chat renderer encodes segment after segment).
  void encode_append(std::string_view text, bool parse_special, std::vector<int32_t>* out) const;

  // The raw bytes a token stands for (byte-level decoded; added tokens as written). May be a
  // fragment of a UTF-8 character. Empty for an id outside the vocabulary.
  const std::string& token_to_bytes(int32_t id) const;
  // The vocabulary string of a token, as stored in the file ("Ġthe").
  const std::string& token_text(int32_t id) const;
  // All bytes of ids concatenated (not UTF-8-safe for partial sequences: see StreamDecoder).
  std::string decode(const std::vector<int32_t>& ids) const;

  int32_t n_vocab() const { return static_cast<int32_t>(texts_.size()); }
  int32_t bos() const { return bos_; }
  int32_t eos() const { return eos_; }
  int32_t pad() const { return pad_; }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  TokenType token_type(int32_t id) const;
  bool is_control(int32_t id) const { return token_type(id) == TokenType::kControl; }
  // CONTROL or USER_DEFINED: the tokens that parse_special recognises.
  bool is_added(int32_t id) const;
  bool is_eog(int32_t id) const;  // end of generation: EOS, <|EOT|>, <|im_end|>, <|endoftext|>
  const std::vector<int32_t>& eog_tokens() const { return eog_; }

  // The added token (CONTROL or USER_DEFINED) written at text[pos...], longest first, or -1.
  int32_t added_token_at(std::string_view text, size_t pos) const;

  // The id of a vocabulary string (as in the file: "Ġthe", "<think>"), if there is one.
  std::optional<int32_t> find_token(std::string_view text) const;

 private:
  Tokenizer();
  struct Scratch;
  // Merges are read in place; tokens are copied into texts_.
  Status init(const Vocab& v, const std::vector<std::string>& tokens,
              const std::vector<std::string>& merges);
  void encode_text(std::string_view text, Scratch& s, std::vector<int32_t>* out) const;
  void encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>* out) const;

  std::vector<std::string> texts_;  // [n_vocab] vocabulary strings
  std::vector<std::string> bytes_;  // [n_vocab] raw bytes
  std::vector<TokenType> types_;    // [n_vocab]
  TokenIndex by_text_;              // over texts_
  MergeTable merges_;
  int32_t byte_ids_[256] = {};  // the single-byte token of each byte value
  // Added tokens, longest first, and the first bytes they can start with.
  std::vector<int32_t> added_;
  bool added_first_byte_[256] = {};
  std::vector<int32_t> eog_;
  int32_t bos_ = -1, eos_ = -1, pad_ = -1;
  bool add_bos_ = false, add_eos_ = false;
};

}  // namespace ponder::text
