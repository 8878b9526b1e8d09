#include "convert/hf_vocab.h"

#include <fmt/core.h>

#include <cctype>
#include <filesystem>

#include "base/log.h"
#include "convert/json_file.h"

namespace ponder {
namespace {

using nlohmann::json;

constexpr int32_t kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5;
constexpr int64_t kMaxVocab = int64_t{1} << 24;

// The split regex anywhere in the pre_tokenizer tree (a Split alone or inside a Sequence).
const json* find_split_regex(const json& node) {
  if (node.is_object()) {
    auto type = node.find("type");
    auto pattern = node.find("pattern");
    if (type != node.end() && *type == "Split" && pattern != node.end() && pattern->is_object()) {
      auto re = pattern->find("Regex");
      if (re != pattern->end() && re->is_string()) return &*re;
    }
    for (const auto& [key, child] : node.items()) {
      if (const json* r = find_split_regex(child)) return r;
    }
  } else if (node.is_array()) {
    for (const json& child : node) {
      if (const json* r = find_split_regex(child)) return r;
    }
  }
  return nullptr;
}

bool as_id(const json& j, int64_t* out) {
  if (!j.is_number_integer()) return false;
  const int64_t v = j.get<int64_t>();
  if (v < 0 || v >= kMaxVocab) return false;
  *out = v;
  return true;
}

// "<x>" or {"content": "<x>", ...}; empty when neither.
std::optional<std::string> token_content(const json& entry) {
  if (entry.is_string()) return entry.get<std::string>();
  if (entry.is_object()) {
    auto c = entry.find("content");
    if (c != entry.end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

// Merges with a space inside a part (the [a, b] form allows it) use the byte-level symbol of
// the space, U+0120 "Ġ", so that the GGUF string form stays splittable at its one space.
std::string encode_merge_part(const std::string& part) {
  std::string out;
  for (char c : part) {
    if (c == ' ') {
      out += "\xC4\xA0";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

struct SpecialType {
  const char* hf;        // "bos": tokenizer_config bos_token, add_bos_token, config bos_token_id
  const char* gguf_key;  // nullptr where llama.cpp writes no id key
  const char* add_key;   // nullptr where llama.cpp writes no add_ flag
};
const SpecialType kSpecialTypes[] = {
    {"bos", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.add_bos_token"},
    {"eos", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.add_eos_token"},
    {"unk", "tokenizer.ggml.unknown_token_id", nullptr},
    {"sep", "tokenizer.ggml.seperator_token_id", nullptr},  // sic: the GGUF key's spelling
    {"pad", "tokenizer.ggml.padding_token_id", nullptr},
    {"cls", nullptr, nullptr},
    {"mask", "tokenizer.ggml.mask_token_id", nullptr},
};

}  // namespace

const char* const kQwen2SplitRegex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

void HfVocab::add_to(GgufWriter& w) const {
  w.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  w.set("tokenizer.ggml.pre", GgufValue::string(pre));
  w.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.token_type", GgufValue::i32_array(token_types));
  w.set("tokenizer.ggml.merges", GgufValue::string_array(merges));
  for (const auto& [key, id] : special_ids) w.set(key, GgufValue::u32(id));
  for (const auto& [key, flag] : add_flags) w.set(key, GgufValue::boolean(flag));
  for (const auto& [name, tmpl] : named_templates) {
    w.set("tokenizer.chat_template." + name, GgufValue::string(tmpl));
  }
  if (!named_templates.empty()) {
    std::vector<std::string> names;
    for (const auto& nt : named_templates) names.push_back(nt.first);
    w.set("tokenizer.chat_templates", GgufValue::string_array(names));
  }
  if (chat_template.has_value())
    w.set("tokenizer.chat_template", GgufValue::string(*chat_template));
}

Expected<HfVocab> read_hf_vocab(const std::string& dir, const HfConfig& config) {
  const std::string file = dir + "/tokenizer.json";
  PONDER_ASSIGN_OR_RETURN(json tj, read_json_file(file));
  auto model = tj.is_object() ? tj.find("model") : tj.end();
  if (model == tj.end() || !model->is_object()) {
    return Status::errorf("{}: no \"model\" object", file);
  }
  if (auto type = model->find("type"); type != model->end() && *type != "BPE") {
    return Status::errorf("{}: model type {} is not supported (expected BPE)", file, type->dump());
  }
  const json* regex =
      tj.contains("pre_tokenizer") ? find_split_regex(tj["pre_tokenizer"]) : nullptr;
  if (regex == nullptr) {
    return Status::errorf("{}: the pre_tokenizer has no Split regex (expected Qwen2's)", file);
  }
  if (regex->get<std::string>() != kQwen2SplitRegex) {
    return Status::errorf("{}: the pre-tokenizer regex {} is not Qwen2's, the only one Ponder runs",
                          file, regex->dump());
  }

  // Ids first, to size the vocabulary.
  auto vocab = model->find("vocab");
  if (vocab == model->end() || !vocab->is_object()) {
    return Status::errorf("{}: no \"model.vocab\" object", file);
  }
  struct Added {
    int64_t id;
    std::string content;
    bool special;
  };
  std::vector<Added> added;
  if (auto at = tj.find("added_tokens"); at != tj.end()) {
    if (!at->is_array()) return Status::errorf("{}: \"added_tokens\" is not a list", file);
    for (const json& a : *at) {
      Added x{0, "", false};
      auto content = a.is_object() ? a.find("content") : a.end();
      if (!a.is_object() || !a.contains("id") || !as_id(a["id"], &x.id) || content == a.end() ||
          !content->is_string()) {
        return Status::errorf(
            "{}: added token {} needs an \"id\" below {} and a \"content\" string", file, a.dump(),
            kMaxVocab);
      }
      x.content = content->get<std::string>();
      if (auto sp = a.find("special"); sp != a.end() && sp->is_boolean())
        x.special = sp->get<bool>();
      added.push_back(std::move(x));
    }
  }
  int64_t max_id = -1;
  for (const auto& [text, id] : vocab->items()) {
    int64_t v = 0;
    if (!as_id(id, &v)) {
      return Status::errorf("{}: token {} has id {}, expected an integer in [0, {})", file,
                            json(text).dump(), id.dump(), kMaxVocab);
    }
    max_id = std::max(max_id, v);
  }
  for (const Added& a : added) max_id = std::max(max_id, a.id);
  const int64_t n_vocab = config.n_vocab.value_or(max_id + 1);
  if (max_id >= n_vocab) {
    return Status::errorf("{}: token id {} is past config.json's vocab_size {}", file, max_id,
                          n_vocab);
  }

  HfVocab v;
  v.tokens.resize(static_cast<size_t>(n_vocab));
  v.token_types.assign(static_cast<size_t>(n_vocab), 0);
  for (const auto& [text, id] : vocab->items()) {
    const size_t i = id.get<size_t>();
    if (v.token_types[i] != 0) {
      return Status::errorf("{}: tokens {} and {} share id {}", file, json(v.tokens[i]).dump(),
                            json(text).dump(), i);
    }
    v.tokens[i] = text;
    v.token_types[i] = kNormal;
  }
  for (const Added& a : added) {
    v.tokens[a.id] = a.content;
    v.token_types[a.id] = a.special ? kControl : kUserDefined;
  }
  for (int64_t i = 0; i < n_vocab; ++i) {
    if (v.token_types[i] == 0) {
      v.tokens[i] = fmt::format("[PAD{}]", i);
      v.token_types[i] = kUnused;
    }
  }

  if (auto merges = model->find("merges"); merges != model->end()) {
    if (!merges->is_array()) return Status::errorf("{}: \"model.merges\" is not a list", file);
    v.merges.reserve(merges->size());
    for (const json& m : *merges) {
      if (m.is_string()) {
        v.merges.push_back(m.get<std::string>());
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        v.merges.push_back(encode_merge_part(m[0].get<std::string>()) + " " +
                           encode_merge_part(m[1].get<std::string>()));
      } else {
        return Status::errorf("{}: merge {} is neither \"a b\" nor [\"a\", \"b\"]", file, m.dump());
      }
    }
  }
  if (v.merges.empty()) log_warn("{}: no merges; the tokenizer will not merge anything", file);

  // tokenizer_config.json: template, special tokens by content, add_*_token flags.
  const std::string cfg_file = dir + "/tokenizer_config.json";
  json tc = json::object();
  if (std::filesystem::exists(cfg_file)) {
    PONDER_ASSIGN_OR_RETURN(tc, read_json_file(cfg_file));
    if (!tc.is_object()) return Status::errorf("{}: expected a JSON object", cfg_file);
  }
  auto set_id = [&](const SpecialType& st, int64_t id, const std::string& from) {
    if (st.gguf_key == nullptr) return;
    for (const auto& kv : v.special_ids) {
      if (kv.first == st.gguf_key) return;  // the first source wins
    }
    if (id >= n_vocab) {
      log_warn("{}: {} token id {} is past the vocabulary ({}); not written", from, st.hf, id,
               n_vocab);
      return;
    }
    v.special_ids.emplace_back(st.gguf_key, static_cast<uint32_t>(id));
  };
  for (const SpecialType& st : kSpecialTypes) {
    if (auto add = tc.find(std::string("add_") + st.hf + "_token");
        add != tc.end() && add->is_boolean() && st.add_key != nullptr) {
      v.add_flags.emplace_back(st.add_key, add->get<bool>());
    }
    auto entry = tc.find(std::string(st.hf) + "_token");
    if (entry == tc.end()) continue;
    std::optional<std::string> content = token_content(*entry);
    if (!content.has_value()) continue;
    for (const Added& a : added) {
      if (a.content == *content) {
        set_id(st, a.id, cfg_file);
        break;
      }
    }
  }
  const std::pair<const char*, std::optional<int64_t>> from_config[] = {
      {"bos", config.bos_token_id}, {"eos", config.eos_token_id}, {"pad", config.pad_token_id}};
  for (const SpecialType& st : kSpecialTypes) {
    for (const auto& [hf, id] : from_config) {
      if (id.has_value() && std::string(hf) == st.hf) set_id(st, *id, dir + "/config.json");
    }
  }

  if (auto ct = tc.find("chat_template"); ct != tc.end() && !ct->is_null()) {
    if (ct->is_string()) {
      v.chat_template = ct->get<std::string>();
    } else if (ct->is_array()) {
      for (const json& choice : *ct) {
        auto name = choice.is_object() ? choice.find("name") : choice.end();
        auto tmpl = choice.is_object() ? choice.find("template") : choice.end();
        if (name == choice.end() || tmpl == choice.end() || !name->is_string() ||
            !tmpl->is_string()) {
          continue;
        }
        std::string n = name->get<std::string>();
        for (char& c : n) {
          if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
        }
        if (n == "default") {
          v.chat_template = tmpl->get<std::string>();
        } else if (!n.empty()) {
          v.named_templates.emplace_back(n, tmpl->get<std::string>());
        }
      }
    } else {
      log_warn("{}: chat_template is a {}; ignored", cfg_file, json_kind(*ct));
    }
  }

  // llama.cpp tells the two apart by hashing a test tokenization; the tokenizers differ only in
  // their added tokens and template, so those identify DeepSeek-R1's.
  bool r1 = v.chat_template.has_value() && v.chat_template->find(
                                               "<\xEF\xBD\x9C"
                                               "Assistant\xEF\xBD\x9C>") != std::string::npos;
  for (const Added& a : added) {
    if (a.content ==
        "<\xEF\xBD\x9C"
        "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>")
      r1 = true;
  }
  v.pre = r1 ? "deepseek-r1-qwen" : "qwen2";
  return v;
}

}  // namespace ponder
