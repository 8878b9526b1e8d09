#include "server/common/model_facts.h"

#include <fmt/core.h>

#include "quant/quant_mix.h"

namespace ponder::server {

using nlohmann::json;

namespace {

// The name of llama.cpp's file type (general.file_type), as `ponder quantize` writes it; "" for one
// it does not make.
std::string file_type_name(int64_t t) {
  for (QuantMix mix : all_quant_mixes())
    if (static_cast<int64_t>(quant_mix_file_type(mix)) == t)
      return std::string(quant_mix_name(mix));
  return "";
}

std::string size_words(int64_t n) {
  if (n >= 1'000'000'000) return fmt::format("{:.1f}B", n / 1e9);
  if (n >= 1'000'000) return fmt::format("{:.0f}M", n / 1e6);
  return fmt::format("{:.0f}K", n / 1e3);
}

}  // namespace

json gguf_value_json(const GgufValue& v) {
  switch (v.type()) {
    case GgufType::kString:
      return v.as_string();
    case GgufType::kBool:
      return v.as<uint8_t>() != 0;
    case GgufType::kF32:
      return v.as<float>();
    case GgufType::kF64:
      return v.as<double>();
    case GgufType::kI8:
      return v.as<int8_t>();
    case GgufType::kI16:
      return v.as<int16_t>();
    case GgufType::kI32:
      return v.as<int32_t>();
    case GgufType::kI64:
      return v.as<int64_t>();
    case GgufType::kU8:
      return v.as<uint8_t>();
    case GgufType::kU16:
      return v.as<uint16_t>();
    case GgufType::kU32:
      return v.as<uint32_t>();
    case GgufType::kU64:
      return v.as<uint64_t>();
    case GgufType::kArray: {
      json a = json::object();
      a["type"] = "array";
      a["element_type"] = gguf_type_name(v.elem_type());
      a["length"] = v.array_size();
      return a;
    }
  }
  return nullptr;
}

ModelFacts read_model_facts(const GgufFile& f) {
  ModelFacts m;
  if (auto t = f.get_string("tokenizer.chat_template"); t.has_value()) m.chat_template = *t;
  for (const TensorInfo& t : f.tensors()) m.parameters += t.n_elements;
  m.file_size = f.file_size();
  m.parameter_size = size_words(m.parameters);
  for (const auto& [key, value] : f.metadata()) {
    if (value.type() == GgufType::kArray || key == "tokenizer.chat_template") continue;
    m.model_info[key] = gguf_value_json(value);
  }
  m.model_info["general.parameter_count"] = m.parameters;
  if (auto ft = m.model_info.find("general.file_type");
      ft != m.model_info.end() && ft->is_number_integer()) {
    m.quantization = file_type_name(ft->get<int64_t>());
  }
  return m;
}

}  // namespace ponder::server
