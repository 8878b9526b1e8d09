#include "model/qwen2_config.h"

#include <fmt/core.h>

#include <cmath>
#include <utility>

namespace ponder {

Expected<Qwen2Config> Qwen2Config::from_gguf(const GgufFile& f) {
  auto arch = f.get_string("general.architecture");
  if (!arch.has_value()) return arch.status();
  if (*arch != "qwen2") {
    return Status::errorf(
        "model architecture is {}, but Ponder runs qwen2 models "
        "(DeepSeek-R1-Distill-Qwen, Qwen2/2.5)",
        *arch);
  }
  Qwen2Config c;
  PONDER_ASSIGN_OR_RETURN(uint32_t n_embd, f.get_u32("qwen2.embedding_length"));
  PONDER_ASSIGN_OR_RETURN(uint32_t n_layer, f.get_u32("qwen2.block_count"));
  PONDER_ASSIGN_OR_RETURN(uint32_t n_head, f.get_u32("qwen2.attention.head_count"));
  PONDER_ASSIGN_OR_RETURN(uint32_t n_head_kv,
                          f.get_u32_or("qwen2.attention.head_count_kv", n_head));
  PONDER_ASSIGN_OR_RETURN(uint32_t n_ff, f.get_u32("qwen2.feed_forward_length"));
  PONDER_ASSIGN_OR_RETURN(uint32_t n_ctx, f.get_u32_or("qwen2.context_length", 4096));
  PONDER_ASSIGN_OR_RETURN(c.rope_theta, f.get_f32_or("qwen2.rope.freq_base", 10000.0f));
  PONDER_ASSIGN_OR_RETURN(c.rms_eps, f.get_f32_or("qwen2.attention.layer_norm_rms_epsilon", 1e-6f));
  c.n_embd = n_embd;
  c.n_layer = n_layer;
  c.n_head = n_head;
  c.n_head_kv = n_head_kv;
  c.n_ff = n_ff;
  c.n_ctx_train = n_ctx;
  const std::pair<const char*, uint32_t> dims[] = {
      {"embedding_length", n_embd},     {"block_count", n_layer},
      {"attention.head_count", n_head}, {"attention.head_count_kv", n_head_kv},
      {"feed_forward_length", n_ff},    {"context_length", n_ctx}};
  for (const auto& [key, v] : dims) {
    if (v == 0) return Status::errorf("qwen2.{} is 0; it must be positive", key);
  }
  if (n_embd % n_head != 0 || n_head % n_head_kv != 0) {
    return Status::errorf(
        "qwen2: embedding_length {} / head_count {} / head_count_kv {} do not divide", n_embd,
        n_head, n_head_kv);
  }
  c.head_dim = n_embd / n_head;
  if (c.head_dim % 2 != 0) return Status::errorf("qwen2: head dimension {} is odd", c.head_dim);
  if (!(c.rope_theta > 0) || !std::isfinite(c.rope_theta)) {
    return Status::errorf("qwen2.rope.freq_base is {}; it must be positive and finite",
                          c.rope_theta);
  }
  if (!(c.rms_eps > 0) || !std::isfinite(c.rms_eps)) {
    return Status::errorf(
        "qwen2.attention.layer_norm_rms_epsilon is {}; it must be positive and finite", c.rms_eps);
  }
  // The vocabulary size is the embedding's row count (checked against the tokenizer elsewhere).
  const TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) return Status::error("missing tensor token_embd.weight");
  if (embd->shape.size() != 2) {
    return Status::errorf("tensor token_embd.weight: expected 2 dimensions, found {}",
                          embd->shape_string());
  }
  c.n_vocab = embd->shape[1];
  return c;
}

std::string Qwen2Config::summary() const {
  return fmt::format(
      "n_vocab {}, n_embd {}, n_layer {}, n_head {}, n_head_kv {}, head_dim {}, "
      "n_ff {}, n_ctx_train {}, rope theta {}, rms eps {}",
      n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train, rope_theta,
      rms_eps);
}

}  // namespace ponder
