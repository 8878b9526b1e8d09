// QuantMix: the named quantization mixes of `ponder quantize` (Q4_K_M, Q8_0, ...) and the type
// each tensor gets in them. The choice is llama.cpp's (llama_tensor_get_type in
// src/llama-quant.cpp) for the Qwen2 architecture, so that a model we quantize has the same
// per-tensor types, size and quality as one made by llama-quantize without an importance matrix:
// 1-D tensors and norms keep their type, output.weight (and token_embd.weight when the model has
// no separate output matrix) get Q6_K, and the _M mixes spend more bits on attn_v / ffn_down of
// the layers that llama.cpp's use_more_bits rule picks. Pure logic, no I/O.
// Depends on gguf/ggml_type.h only.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.h"

namespace ponder {

enum class QuantMix {
  F32,
  F16,
  BF16,
  Q4_0,
  Q4_1,
  Q5_0,
  Q5_1,
  Q8_0,
  Q2_K,
  Q3_K_S,
  Q3_K_M,
  Q3_K_L,
  Q4_K_S,
  Q4_K_M,
  Q5_K_S,
  Q5_K_M,
  Q6_K,
};

// "Q4_K_M" (case-insensitive on input); nullopt for a name we do not know.
std::optional<QuantMix> quant_mix_from_name(std::string_view name);
std::string_view quant_mix_name(QuantMix mix);
// Every mix, in the order above (for --help and tests).
const std::vector<QuantMix>& all_quant_mixes();

// llama.cpp's LLAMA_FTYPE value, written as general.file_type (Q4_K_M -> 15, BF16 -> 32).
uint32_t quant_mix_file_type(QuantMix mix);
// The type most tensors get (Q4_K_M -> Q4_K).
GgmlType quant_mix_default_type(QuantMix mix);

// What the choice depends on besides the tensor itself.
struct MixModelInfo {
  int n_layer = 0;         // block_count: layers counted by the use_more_bits rule
  int n_gqa = 1;           // head_count / head_count_kv (Q2_K gives attn_v Q4_K when >= 4)
  bool has_output = true;  // false: token_embd doubles as the output matrix (tied embeddings)
};

struct TensorTypeChoice {
  GgmlType type;
  // The row length is not a multiple of the preferred type's block size, so a compatible type
  // was taken instead (Q4_K -> Q5_0, Q6_K -> Q8_0, ...; F16 as the last resort).
  bool fallback = false;
};

// The type `name` (shape in ggml order, currently stored as `current`) gets in `mix`.
// Tensors that are not quantized (1-D, norms, names not ending in "weight") keep `current`.
TensorTypeChoice choose_tensor_type(QuantMix mix, const MixModelInfo& model, std::string_view name,
                                    std::span<const int64_t> shape, GgmlType current);

// llama.cpp's rule for which layers of n_layer get more bits in the _M mixes: the first and last
// eighth, and every third layer in between.
bool use_more_bits(int i_layer, int n_layer);

}  // namespace ponder
