#include "convert/hf_exporter.h"

#include <fmt/core.h>

#include <filesystem>
#include <set>

#include "convert/hf_converter.h"
#include "convert/hf_vocab.h"
#include "convert/json_file.h"
#include "convert/safetensors.h"

namespace ponder {
namespace {

using nlohmann::json;

constexpr int32_t kControl = 3, kUserDefined = 4, kUnused = 5;

Status write_config(const GgufFile& in, const std::string& dir) {
  json c = json::object();
  c["architectures"] = {"Qwen2ForCausalLM"};
  c["model_type"] = "qwen2";
  if (auto name = in.get_string("general.name"); name.has_value()) c["_name_or_path"] = *name;
  const std::pair<const char*, const char*> ints[] = {
      {"qwen2.embedding_length", "hidden_size"},
      {"qwen2.feed_forward_length", "intermediate_size"},
      {"qwen2.block_count", "num_hidden_layers"},
      {"qwen2.attention.head_count", "num_attention_heads"},
      {"qwen2.attention.head_count_kv", "num_key_value_heads"},
      {"qwen2.context_length", "max_position_embeddings"},
      {"tokenizer.ggml.bos_token_id", "bos_token_id"},
      {"tokenizer.ggml.eos_token_id", "eos_token_id"},
  };
  for (const auto& [key, hf] : ints) {
    if (in.find(key) == nullptr) continue;
    PONDER_ASSIGN_OR_RETURN(uint32_t v, in.get_u32(key));
    c[hf] = v;
  }
  // Floats go out as the double of the stored f32, which reads back to the same f32.
  const std::pair<const char*, const char*> floats[] = {
      {"qwen2.rope.freq_base", "rope_theta"},
      {"qwen2.attention.layer_norm_rms_epsilon", "rms_norm_eps"},
  };
  for (const auto& [key, hf] : floats) {
    if (in.find(key) == nullptr) continue;
    PONDER_ASSIGN_OR_RETURN(float v, in.get_f32(key));
    c[hf] = static_cast<double>(v);
  }
  if (auto tokens = in.get_string_array("tokenizer.ggml.tokens"); tokens.has_value()) {
    c["vocab_size"] = (*tokens)->size();
  }
  c["tie_word_embeddings"] =
      in.find_tensor("output.weight") == nullptr && in.find_tensor("token_embd.weight") != nullptr;
  if (const TensorInfo* e = in.find_tensor("token_embd.weight")) {
    c["torch_dtype"] = e->type == GgmlType::BF16  ? "bfloat16"
                       : e->type == GgmlType::F16 ? "float16"
                                                  : "float32";
  }
  return write_json_file(dir + "/config.json", c);
}

Status write_tokenizer(const GgufFile& in, const std::string& dir, const ExportOptions& options) {
  PONDER_ASSIGN_OR_RETURN(std::string model, in.get_string("tokenizer.ggml.model"));
  if (model != "gpt2") {
    return Status::errorf("{}: tokenizer model {} cannot be exported (expected gpt2)", in.path(),
                          model);
  }
  PONDER_ASSIGN_OR_RETURN(const std::vector<std::string>* tokens,
                          in.get_string_array("tokenizer.ggml.tokens"));
  PONDER_ASSIGN_OR_RETURN(std::vector<int32_t> types,
                          in.get_i32_array("tokenizer.ggml.token_type"));
  PONDER_ASSIGN_OR_RETURN(const std::vector<std::string>* merges,
                          in.get_string_array("tokenizer.ggml.merges"));
  if (types.size() != tokens->size()) {
    return Status::errorf("{}: {} token types for {} tokens", in.path(), types.size(),
                          tokens->size());
  }

  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < tokens->size(); ++i) {
    const std::string& t = (*tokens)[i];
    if (types[i] == kUnused && t == fmt::format("[PAD{}]", i)) continue;  // re-made on import
    if (types[i] == kControl || types[i] == kUserDefined) {
      added.push_back({{"id", i},
                       {"content", t},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", types[i] == kControl}});
      continue;
    }
    if (vocab.contains(t)) {
      return Status::errorf("{}: token {} appears twice in the vocabulary", in.path(),
                            json(t).dump());
    }
    vocab[t] = i;
  }
  json merge_list = json::array();
  for (const std::string& m : *merges) {
    const size_t sp = m.find(' ');
    if (options.merges_as_pairs && sp != std::string::npos) {
      merge_list.push_back({m.substr(0, sp), m.substr(sp + 1)});
    } else {
      merge_list.push_back(m);
    }
  }
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", false},
                           {"trim_offsets", false},
                           {"use_regex", false}};
  json tj = json::object();
  tj["version"] = "1.0";
  tj["truncation"] = nullptr;
  tj["padding"] = nullptr;
  tj["added_tokens"] = added;
  tj["normalizer"] = {{"type", "NFC"}};
  tj["pre_tokenizer"] = {{"type", "Sequence"},
                         {"pretokenizers",
                          {{{"type", "Split"},
                            {"pattern", {{"Regex", kQwen2SplitRegex}}},
                            {"behavior", "Isolated"},
                            {"invert", false}},
                           byte_level}}};
  tj["post_processor"] = byte_level;
  tj["decoder"] = byte_level;
  tj["model"] = {{"type", "BPE"},
                 {"dropout", nullptr},
                 {"unk_token", nullptr},
                 {"continuing_subword_prefix", ""},
                 {"end_of_word_suffix", ""},
                 {"fuse_unk", false},
                 {"byte_fallback", false},
                 {"ignore_merges", false},
                 {"vocab", vocab},
                 {"merges", merge_list}};
  PONDER_RETURN_IF_ERROR(write_json_file(dir + "/tokenizer.json", tj));

  json tc = json::object();
  tc["tokenizer_class"] = "LlamaTokenizerFast";
  tc["clean_up_tokenization_spaces"] = false;
  for (const char* flag : {"add_bos_token", "add_eos_token"}) {
    const std::string key = std::string("tokenizer.ggml.") + flag;
    if (in.find(key) == nullptr) continue;
    PONDER_ASSIGN_OR_RETURN(bool v, in.get_bool(key));
    tc[flag] = v;
  }
  // bos as a plain string, the others as {content: ...} objects: both forms HF writes.
  const std::pair<const char*, const char*> specials[] = {
      {"tokenizer.ggml.bos_token_id", "bos_token"},
      {"tokenizer.ggml.eos_token_id", "eos_token"},
      {"tokenizer.ggml.unknown_token_id", "unk_token"},
      {"tokenizer.ggml.seperator_token_id", "sep_token"},
      {"tokenizer.ggml.padding_token_id", "pad_token"},
      {"tokenizer.ggml.mask_token_id", "mask_token"},
  };
  for (const auto& [key, hf] : specials) {
    if (in.find(key) == nullptr) continue;
    PONDER_ASSIGN_OR_RETURN(uint32_t id, in.get_u32(key));
    if (id >= tokens->size()) continue;
    const std::string& content = (*tokens)[id];
    if (std::string(hf) == "bos_token") {
      tc[hf] = content;
    } else {
      tc[hf] = {{"__type", "AddedToken"}, {"content", content}, {"lstrip", false},
                {"normalized", false},    {"rstrip", false},    {"single_word", false}};
    }
  }
  if (auto t = in.get_string("tokenizer.chat_template"); t.has_value()) tc["chat_template"] = *t;
  return write_json_file(dir + "/tokenizer_config.json", tc);
}

Status write_tensors(const GgufFile& in, const std::string& dir, const ExportOptions& options) {
  std::vector<std::vector<StWriteTensor>> shards(1);
  int64_t shard_bytes = 0, total = 0;
  for (const TensorInfo& t : in.tensors()) {
    const std::string hf = hf_tensor_name(t.name);
    if (hf.empty()) return Status::errorf("{}: tensor {} has no Qwen2 HF name", in.path(), t.name);
    StWriteTensor w;
    w.name = hf;
    switch (t.type) {
      case GgmlType::F32:
        w.dtype = StDtype::kF32;
        break;
      case GgmlType::F16:
        w.dtype = StDtype::kF16;
        break;
      case GgmlType::BF16:
        w.dtype = StDtype::kBF16;
        break;
      default:
        return Status::errorf("{}: tensor {} is {}; only F32, F16 and BF16 can be exported",
                              in.path(), t.name, ggml_type_name(t.type));
    }
    w.shape.assign(t.shape.rbegin(), t.shape.rend());
    w.data = t.data;
    if (options.max_shard_bytes > 0 && shard_bytes > 0 &&
        shard_bytes + t.n_bytes > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(std::move(w));
    shard_bytes += t.n_bytes;
    total += t.n_bytes;
  }
  if (options.max_shard_bytes <= 0) return write_safetensors(dir + "/model.safetensors", shards[0]);
  json weight_map = json::object();
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string name =
        fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    PONDER_RETURN_IF_ERROR(write_safetensors(dir + "/" + name, shards[i]));
    for (const StWriteTensor& w : shards[i]) weight_map[w.name] = name;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  return write_json_file(dir + "/model.safetensors.index.json", index);
}

}  // namespace

Status export_hf(const GgufFile& in, const std::string& dir, const ExportOptions& options) {
  PONDER_ASSIGN_OR_RETURN(std::string arch, in.get_string("general.architecture"));
  if (arch != "qwen2") {
    return Status::errorf("{}: architecture {} cannot be exported (expected qwen2)", in.path(),
                          arch);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::errorf("cannot create {}: {}", dir, ec.message());
  PONDER_RETURN_IF_ERROR(write_config(in, dir));
  PONDER_RETURN_IF_ERROR(write_tokenizer(in, dir, options));
  if (options.vocab_only) return Status::ok();
  return write_tensors(in, dir, options);
}

}  // namespace ponder
