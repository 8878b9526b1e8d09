#include "text/tokenizer.h"

#include <algorithm>
#include <cstring>

#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/nfc.h"
#include "text/piece_cache.h"
#include "text/pre_tokenizer.h"

namespace ponder::text {

struct Tokenizer::Scratch {
  std::string normalized;
  std::vector<std::string_view> pieces;
  std::vector<int32_t> symbols;
  PreTokenizer pre;
  BpeScratch bpe;
  PieceCache cache;
};

namespace {

const std::string kEmpty;
constexpr size_t kCacheMinBytes = 512;

// An optional integer key: -1 when it is missing.
Expected<int32_t> optional_id(const GgufFile& file, std::string_view key) {
  if (file.find(key) == nullptr) return -1;
  PONDER_ASSIGN_OR_RETURN(uint32_t v, file.get_u32(key));
  return static_cast<int32_t>(v);
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Expected<Tokenizer> Tokenizer::from_gguf(const GgufFile& file) {
  PONDER_ASSIGN_OR_RETURN(std::string model, file.get_string("tokenizer.ggml.model"));
  if (model != "gpt2") {
    return Status::errorf("tokenizer.ggml.model: expected \"gpt2\" (byte-level BPE), found \"{}\"",
                          model);
  }
  std::string pre = "qwen2";
  if (file.find("tokenizer.ggml.pre") != nullptr) {
    PONDER_ASSIGN_OR_RETURN(pre, file.get_string("tokenizer.ggml.pre"));
  }
  if (pre != "qwen2" && pre != "deepseek-r1-qwen") {
    return Status::errorf(
        "tokenizer.ggml.pre: expected \"qwen2\" or \"deepseek-r1-qwen\", found \"{}\"", pre);
  }
  Vocab v;
  PONDER_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens,
                          file.get_string_array("tokenizer.ggml.tokens"));
  if (file.find("tokenizer.ggml.token_type") != nullptr) {
    PONDER_ASSIGN_OR_RETURN(v.token_types, file.get_i32_array("tokenizer.ggml.token_type"));
  }
  PONDER_ASSIGN_OR_RETURN(const std::vector<std::string>* merges,
                          file.get_string_array("tokenizer.ggml.merges"));
  PONDER_ASSIGN_OR_RETURN(v.bos, optional_id(file, "tokenizer.ggml.bos_token_id"));
  PONDER_ASSIGN_OR_RETURN(v.eos, optional_id(file, "tokenizer.ggml.eos_token_id"));
  PONDER_ASSIGN_OR_RETURN(v.pad, optional_id(file, "tokenizer.ggml.padding_token_id"));
  PONDER_ASSIGN_OR_RETURN(v.add_bos, file.get_bool_or("tokenizer.ggml.add_bos_token", false));
  PONDER_ASSIGN_OR_RETURN(v.add_eos, file.get_bool_or("tokenizer.ggml.add_eos_token", false));
  Tokenizer t;
  PONDER_RETURN_IF_ERROR(t.init(v, *tokens, *merges));
  return t;
}

Expected<Tokenizer> Tokenizer::from_vocab(Vocab vocab) {
  Tokenizer t;
  PONDER_RETURN_IF_ERROR(t.init(vocab, vocab.tokens, vocab.merges));
  return t;
}

Status Tokenizer::init(const Vocab& v, const std::vector<std::string>& tokens,
                       const std::vector<std::string>& merges) {
  const size_t n = tokens.size();
  if (n == 0) return Status::error("tokenizer.ggml.tokens: empty vocabulary");
  if (n > static_cast<size_t>(INT32_MAX / 2)) {
    return Status::errorf("tokenizer.ggml.tokens: {} tokens is too many", n);
  }
  if (!v.token_types.empty() && v.token_types.size() != n) {
    return Status::errorf(
        "tokenizer.ggml.token_type: expected {} entries (one per token), found {}", n,
        v.token_types.size());
  }
  texts_ = tokens;
  types_.resize(n, TokenType::kNormal);
  bytes_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (!v.token_types.empty()) {
      const int32_t type = v.token_types[i];
      if (type < 0 || type > static_cast<int32_t>(TokenType::kByte)) {
        return Status::errorf("tokenizer.ggml.token_type[{}]: expected 0..6, found {}", i, type);
      }
      types_[i] = static_cast<TokenType>(type);
    }
    const int32_t id = static_cast<int32_t>(i);
    if (is_added(id) || !byte_level_decode(texts_[i], &bytes_[i])) bytes_[i] = texts_[i];
  }
  by_text_.build(texts_);
  for (int b = 0; b < 256; ++b) {
    const std::string piece = byte_level_encode(std::string(1, static_cast<char>(b)));
    const int32_t id = by_text_.find(piece);
    if (id < 0) {
      return Status::errorf("tokenizer.ggml.tokens: no token for byte 0x{:02X} (\"{}\")", b, piece);
    }
    byte_ids_[b] = id;
  }

  merges_.reserve(merges.size());
  std::string joined;
  for (size_t r = 0; r < merges.size(); ++r) {
    const std::string& m = merges[r];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos) {
      return Status::errorf("tokenizer.ggml.merges[{}]: expected \"left right\", found \"{}\"", r,
                            m);
    }
    const std::string_view left(m.data(), sp);
    const std::string_view right(m.data() + sp + 1, m.size() - sp - 1);
    joined.assign(left);
    joined.append(right);
    const int32_t l = by_text_.find(left);
    const int32_t rr = by_text_.find(right);
    const int32_t j = by_text_.find(joined);
    if (l < 0 || rr < 0 || j < 0) {
      return Status::errorf(
          "tokenizer.ggml.merges[{}]: \"{}\" names a token missing from the "
          "vocabulary",
          r, m);
    }
    merges_.insert(l, rr, {static_cast<int32_t>(r), j});
  }

  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (is_added(id) && !texts_[i].empty()) {
      added_.push_back(id);
      added_first_byte_[static_cast<uint8_t>(texts_[i][0])] = true;
    }
  }
  std::stable_sort(added_.begin(), added_.end(),
                   [this](int32_t a, int32_t b) { return texts_[a].size() > texts_[b].size(); });

  auto check_id = [n](int32_t id, const char* key) -> Status {
    if (id < -1 || id >= static_cast<int32_t>(n)) {
      return Status::errorf("tokenizer.ggml.{}: expected an id below {}, found {}", key, n, id);
    }
    return Status::ok();
  };
  PONDER_RETURN_IF_ERROR(check_id(v.bos, "bos_token_id"));
  PONDER_RETURN_IF_ERROR(check_id(v.eos, "eos_token_id"));
  PONDER_RETURN_IF_ERROR(check_id(v.pad, "padding_token_id"));
  bos_ = v.bos;
  eos_ = v.eos;
  pad_ = v.pad;
  add_bos_ = v.add_bos && bos_ >= 0;
  add_eos_ = v.add_eos && eos_ >= 0;
  if (eos_ >= 0) eog_.push_back(eos_);
  for (const char* s : {"<|EOT|>", "<|im_end|>", "<|endoftext|>", "<|eot_id|>"}) {
    if (auto id = find_token(s); id && is_added(*id) && *id != eos_) eog_.push_back(*id);
  }
  return Status::ok();
}

TokenType Tokenizer::token_type(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return TokenType::kUndefined;
  return types_[id];
}

bool Tokenizer::is_added(int32_t id) const {
  const TokenType t = token_type(id);
  return t == TokenType::kControl || t == TokenType::kUserDefined;
}

bool Tokenizer::is_eog(int32_t id) const {
  return std::find(eog_.begin(), eog_.end(), id) != eog_.end();
}

const std::string& Tokenizer::token_to_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return kEmpty;
  return bytes_[id];
}

const std::string& Tokenizer::token_text(int32_t id) const {
  if (id < 0 || id >= n_vocab()) return kEmpty;
  return texts_[id];
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (int32_t id : ids) out += token_to_bytes(id);
  return out;
}

std::optional<int32_t> Tokenizer::find_token(std::string_view text) const {
  const int32_t id = by_text_.find(text);
  if (id < 0) return std::nullopt;
  return id;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 8);
  encode_append(text, parse_special, &out);
  return out;
}

void Tokenizer::encode_append(std::string_view text, bool parse_special,
                              std::vector<int32_t>* out) const {
  thread_local Scratch scratch;
  if (!parse_special || added_.empty()) {
    encode_text(text, scratch, out);
    return;
  }
  // Leftmost-longest match of the added tokens (added_ is sorted longest first).
  size_t start = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!added_first_byte_[static_cast<uint8_t>(text[i])]) {
      ++i;
      continue;
    }
    const int32_t match = added_token_at(text, i);
    if (match < 0) {
      ++i;
      continue;
    }
    encode_text(text.substr(start, i - start), scratch, out);
    out->push_back(match);
    i += texts_[match].size();
    start = i;
  }
  encode_text(text.substr(start), scratch, out);
}

int32_t Tokenizer::added_token_at(std::string_view text, size_t pos) const {
  if (pos >= text.size() || !added_first_byte_[static_cast<uint8_t>(text[pos])]) return -1;
  for (int32_t id : added_) {
    const std::string& t = texts_[id];
    if (t.size() <= text.size() - pos && std::memcmp(text.data() + pos, t.data(), t.size()) == 0) {
      return id;
    }
  }
  return -1;
}

void Tokenizer::encode_text(std::string_view text, Scratch& s, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  if (nfc_normalize(text, &s.normalized)) text = s.normalized;
  s.pieces.clear();
  s.pre.split(text, &s.pieces);
  // Short texts have few repeats: the cache would cost more than it saves.
  if (text.size() < kCacheMinBytes) {
    for (std::string_view piece : s.pieces) encode_piece(piece, s, out);
    return;
  }
  s.cache.clear();
  for (std::string_view piece : s.pieces) {
    if (piece.size() == 1) {
      out->push_back(byte_ids_[static_cast<uint8_t>(piece[0])]);
      continue;
    }
    const uint64_t h = PieceCache::hash_of(piece);
    const int32_t* ids = nullptr;
    size_t n = 0;
    if (s.cache.find(piece, h, &ids, &n)) {
      out->insert(out->end(), ids, ids + n);
      continue;
    }
    const size_t before = out->size();
    encode_piece(piece, s, out);
    s.cache.insert(piece, h, out->data() + before, out->size() - before);
  }
}

void Tokenizer::encode_piece(std::string_view piece, Scratch& s, std::vector<int32_t>* out) const {
  s.symbols.resize(piece.size());
  for (size_t k = 0; k < piece.size(); ++k) {
    s.symbols[k] = byte_ids_[static_cast<uint8_t>(piece[k])];
  }
  bpe_merge(merges_, &s.symbols, &s.bpe);
  out->insert(out->end(), s.symbols.begin(), s.symbols.end());
}

}  // namespace ponder::text
