#include "convert/hf_config.h"

#include "convert/json_file.h"

namespace ponder {
namespace {

using nlohmann::json;

// A required positive integer field.
Status get_positive(const json& j, const std::string& file, const char* key, int64_t* out) {
  auto it = j.find(key);
  if (it == j.end()) return Status::errorf("{}: missing \"{}\"", file, key);
  if (!it->is_number_integer() || it->get<int64_t>() <= 0 || it->get<int64_t>() > (1ll << 40)) {
    return Status::errorf("{}: \"{}\" is {}, expected a positive integer", file, key, it->dump());
  }
  *out = it->get<int64_t>();
  return Status::ok();
}

Status get_optional_int(const json& j, const std::string& file, const char* key,
                        std::optional<int64_t>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > (1ll << 40)) {
    return Status::errorf("{}: \"{}\" is {}, expected a non-negative integer", file, key,
                          it->dump());
  }
  *out = it->get<int64_t>();
  return Status::ok();
}

Status get_optional_number(const json& j, const std::string& file, const char* key,
                           std::optional<double>* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return Status::ok();
  if (!it->is_number()) {
    return Status::errorf("{}: \"{}\" is {}, expected a number", file, key, it->dump());
  }
  *out = it->get<double>();
  return Status::ok();
}

}  // namespace

Expected<HfConfig> read_hf_config(const std::string& dir) {
  const std::string file = dir + "/config.json";
  PONDER_ASSIGN_OR_RETURN(json j, read_json_file(file));
  if (!j.is_object()) return Status::errorf("{}: expected a JSON object", file);
  HfConfig c;
  auto archs = j.find("architectures");
  if (archs == j.end() || !archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
    return Status::errorf("{}: no \"architectures\" list; only Qwen2ForCausalLM is supported",
                          file);
  }
  c.architecture = (*archs)[0].get<std::string>();
  if (c.architecture != "Qwen2ForCausalLM") {
    return Status::errorf(
        "{}: architecture {} is not supported (Ponder converts Qwen2ForCausalLM only, the "
        "architecture of DeepSeek-R1-Distill-Qwen)",
        file, c.architecture);
  }
  if (auto it = j.find("_name_or_path"); it != j.end() && it->is_string()) {
    c.name_or_path = it->get<std::string>();
  }
  PONDER_RETURN_IF_ERROR(get_positive(j, file, "hidden_size", &c.n_embd));
  PONDER_RETURN_IF_ERROR(get_positive(j, file, "intermediate_size", &c.n_ff));
  PONDER_RETURN_IF_ERROR(get_positive(j, file, "num_hidden_layers", &c.n_layer));
  PONDER_RETURN_IF_ERROR(get_positive(j, file, "num_attention_heads", &c.n_head));
  c.n_head_kv = c.n_head;
  if (j.contains("num_key_value_heads")) {
    PONDER_RETURN_IF_ERROR(get_positive(j, file, "num_key_value_heads", &c.n_head_kv));
  }
  if (c.n_embd % c.n_head != 0) {
    return Status::errorf("{}: hidden_size {} is not a multiple of num_attention_heads {}", file,
                          c.n_embd, c.n_head);
  }
  if (c.n_head % c.n_head_kv != 0) {
    return Status::errorf("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}",
                          file, c.n_head, c.n_head_kv);
  }
  PONDER_RETURN_IF_ERROR(get_optional_int(j, file, "max_position_embeddings", &c.n_ctx));
  PONDER_RETURN_IF_ERROR(get_optional_int(j, file, "vocab_size", &c.n_vocab));
  PONDER_RETURN_IF_ERROR(get_optional_number(j, file, "rope_theta", &c.rope_theta));
  PONDER_RETURN_IF_ERROR(get_optional_number(j, file, "rms_norm_eps", &c.rms_norm_eps));
  PONDER_RETURN_IF_ERROR(get_optional_int(j, file, "bos_token_id", &c.bos_token_id));
  PONDER_RETURN_IF_ERROR(get_optional_int(j, file, "eos_token_id", &c.eos_token_id));
  PONDER_RETURN_IF_ERROR(get_optional_int(j, file, "pad_token_id", &c.pad_token_id));
  if (auto it = j.find("tie_word_embeddings"); it != j.end() && !it->is_null()) {
    if (!it->is_boolean()) {
      return Status::errorf("{}: \"tie_word_embeddings\" is {}, expected true or false", file,
                            it->dump());
    }
    c.tie_word_embeddings = it->get<bool>();
  }
  if (auto rs = j.find("rope_scaling"); rs != j.end() && rs->is_object()) {
    auto type = rs->find("type");
    if (type == rs->end()) type = rs->find("rope_type");
    if (type != rs->end() && type->is_string() && type->get<std::string>() == "yarn") {
      PONDER_RETURN_IF_ERROR(get_optional_number(*rs, file, "factor", &c.yarn_factor));
      PONDER_RETURN_IF_ERROR(
          get_optional_int(*rs, file, "original_max_position_embeddings", &c.yarn_orig_ctx));
    }
  }
  return c;
}

}  // namespace ponder
