#include "quant/quant_mix.h"

#include <cctype>
#include <charconv>
#include <string>

namespace ponder {

namespace {

struct MixInfo {
  QuantMix mix;
  const char* name;
  uint32_t file_type;  // LLAMA_FTYPE_*
  GgmlType default_type;
};

constexpr MixInfo kMixes[] = {
    {QuantMix::F32, "F32", 0, GgmlType::F32},
    {QuantMix::F16, "F16", 1, GgmlType::F16},
    {QuantMix::BF16, "BF16", 32, GgmlType::BF16},
    {QuantMix::Q4_0, "Q4_0", 2, GgmlType::Q4_0},
    {QuantMix::Q4_1, "Q4_1", 3, GgmlType::Q4_1},
    {QuantMix::Q5_0, "Q5_0", 8, GgmlType::Q5_0},
    {QuantMix::Q5_1, "Q5_1", 9, GgmlType::Q5_1},
    {QuantMix::Q8_0, "Q8_0", 7, GgmlType::Q8_0},
    {QuantMix::Q2_K, "Q2_K", 10, GgmlType::Q2_K},
    {QuantMix::Q3_K_S, "Q3_K_S", 11, GgmlType::Q3_K},
    {QuantMix::Q3_K_M, "Q3_K_M", 12, GgmlType::Q3_K},
    {QuantMix::Q3_K_L, "Q3_K_L", 13, GgmlType::Q3_K},
    {QuantMix::Q4_K_S, "Q4_K_S", 14, GgmlType::Q4_K},
    {QuantMix::Q4_K_M, "Q4_K_M", 15, GgmlType::Q4_K},
    {QuantMix::Q5_K_S, "Q5_K_S", 16, GgmlType::Q5_K},
    {QuantMix::Q5_K_M, "Q5_K_M", 17, GgmlType::Q5_K},
    {QuantMix::Q6_K, "Q6_K", 18, GgmlType::Q6_K},
};

const MixInfo& info(QuantMix mix) {
  for (const MixInfo& m : kMixes) {
    if (m.mix == mix) return m;
  }
  return kMixes[0];  // unreachable: every enumerator is in the table
}

bool is_block_quantized(GgmlType t) {
  return t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// Dimensions up to the last one larger than 1, as ggml counts them ([256, 1] is 1-D).
int n_dims(std::span<const int64_t> shape) {
  int n = 1;
  for (int i = 0; i < static_cast<int>(shape.size()); ++i) {
    if (shape[i] > 1) n = i + 1;
  }
  return n;
}

// Which tensors llama.cpp quantizes at all (tensor_allows_quantization, the Qwen2 part).
bool allows_quantization(std::string_view name, std::span<const int64_t> shape) {
  if (n_dims(shape) < 2) return false;
  if (!ends_with(name, "weight")) return false;
  if (contains(name, "_norm.weight")) return false;
  if (contains(name, "ffn_gate_inp.weight")) return false;  // MoE routers
  return true;
}

// The layer number of "blk.N.<...>", or -1.
int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  const char* begin = name.data() + 4;
  const char* end = name.data() + name.size();
  int layer = -1;
  auto [ptr, ec] = std::from_chars(begin, end, layer);
  if (ec != std::errc() || ptr == end || *ptr != '.') return -1;
  return layer;
}

enum class Category { kTokenEmbd, kOutput, kAttnV, kAttnOutput, kFfnDown, kOther };

Category category_of(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight") return Category::kTokenEmbd;
  // llama.cpp treats fused qkv and MLA kv_b like attn_v.
  if (contains(name, "attn_qkv.weight") || contains(name, "attn_kv_b.weight") ||
      contains(name, "attn_v.weight")) {
    return Category::kAttnV;
  }
  if (contains(name, "attn_output.weight")) return Category::kAttnOutput;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// llama.cpp's tensor_type_fallback: a type whose block divides the row.
TensorTypeChoice fit_row(GgmlType type, int64_t row_length) {
  if (row_length % ggml_type_info(type).block_size == 0) return {type, false};
  GgmlType fallback = GgmlType::F16;
  switch (type) {
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
      fallback = GgmlType::Q4_0;
      break;
    case GgmlType::Q4_K:
      fallback = GgmlType::Q5_0;
      break;
    case GgmlType::Q5_K:
      fallback = GgmlType::Q5_1;
      break;
    case GgmlType::Q6_K:
      fallback = GgmlType::Q8_0;
      break;
    default:
      // llama.cpp refuses a legacy type on a row that is not a multiple of 32; we store F16.
      break;
  }
  if (row_length % ggml_type_info(fallback).block_size != 0) fallback = GgmlType::F16;
  return {fallback, true};
}

// llama_tensor_get_type_impl for Qwen2 (no experts, not Falcon, not LLaMA-70B), for our mixes.
GgmlType mix_rule(QuantMix mix, const MixModelInfo& model, std::string_view name,
                  int64_t row_length, GgmlType type) {
  const Category category = category_of(name);
  const int layer = layer_of(name);
  const int n_layer = model.n_layer;

  if (category == Category::kOutput || (!model.has_output && category == Category::kTokenEmbd)) {
    if (row_length % ggml_type_info(type).block_size != 0) return GgmlType::Q8_0;
    return type == GgmlType::Q8_0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
  }
  switch (category) {
    case Category::kAttnV:
      // llama.cpp counts attn_v tensors in layer order; with one per layer that is the layer.
      switch (mix) {
        case QuantMix::Q2_K:
          return model.n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
        case QuantMix::Q3_K_M:
          return layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
        case QuantMix::Q3_K_L:
          return GgmlType::Q5_K;
        case QuantMix::Q4_K_M:
        case QuantMix::Q5_K_M:
          return use_more_bits(layer, n_layer) ? GgmlType::Q6_K : type;
        case QuantMix::Q4_K_S:
          return layer < 4 ? GgmlType::Q5_K : type;
        default:
          return type;
      }
    case Category::kFfnDown:
      switch (mix) {
        case QuantMix::Q2_K:
          return GgmlType::Q3_K;
        case QuantMix::Q3_K_M:
          return layer < n_layer / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
        case QuantMix::Q3_K_L:
          return GgmlType::Q5_K;
        case QuantMix::Q4_K_M:
        case QuantMix::Q5_K_M:
          return use_more_bits(layer, n_layer) ? GgmlType::Q6_K : type;
        case QuantMix::Q4_K_S:
          return layer < n_layer / 8 ? GgmlType::Q5_K : type;
        default:
          return type;
      }
    case Category::kAttnOutput:
      switch (mix) {
        case QuantMix::Q2_K:
          return GgmlType::Q3_K;
        case QuantMix::Q3_K_M:
          return GgmlType::Q4_K;
        case QuantMix::Q3_K_L:
          return GgmlType::Q5_K;
        default:
          return type;
      }
    default:
      return type;  // token_embd (untied), attn_q, attn_k, ffn_gate, ffn_up
  }
}

}  // namespace

std::optional<QuantMix> quant_mix_from_name(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const MixInfo& m : kMixes) {
    if (upper == m.name) return m.mix;
  }
  return std::nullopt;
}

std::string_view quant_mix_name(QuantMix mix) { return info(mix).name; }

const std::vector<QuantMix>& all_quant_mixes() {
  static const std::vector<QuantMix> mixes = [] {
    std::vector<QuantMix> v;
    for (const MixInfo& m : kMixes) v.push_back(m.mix);
    return v;
  }();
  return mixes;
}

uint32_t quant_mix_file_type(QuantMix mix) { return info(mix).file_type; }
GgmlType quant_mix_default_type(QuantMix mix) { return info(mix).default_type; }

bool use_more_bits(int i_layer, int n_layer) {
  return i_layer < n_layer / 8 || i_layer >= 7 * n_layer / 8 || (i_layer - n_layer / 8) % 3 == 2;
}

TensorTypeChoice choose_tensor_type(QuantMix mix, const MixModelInfo& model, std::string_view name,
                                    std::span<const int64_t> shape, GgmlType current) {
  if (shape.empty() || !allows_quantization(name, shape)) return {current, false};
  const GgmlType default_type = quant_mix_default_type(mix);
  // The float mixes convert every quantizable tensor and have no per-tensor rules.
  if (!is_block_quantized(default_type)) return {default_type, false};
  return fit_row(mix_rule(mix, model, name, shape[0], default_type), shape[0]);
}

}  // namespace ponder
