// Qwen2Model: the Qwen2 forward pass (DeepSeek-R1-Distill-Qwen) over a Batch of rows, straight
// from the GGUF file's weights. Reads top to bottom like the architecture: embeddings, then per
// layer attention rmsnorm, q/k/v projections with bias, NeoX RoPE, K/V into the cache, causal GQA
// attention, output projection, residual, ffn rmsnorm, SwiGLU, residual; final norm and logits
// for the rows that ask.
// Depends on gguf, kernels, model.
#pragma once

#include <memory>
#include <thread>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "model/attention.h"
#include "model/batch.h"
#include "model/bf16_attention_choice.h"
#include "model/kv_cache.h"
#include "model/prefetch_calibration.h"
#include "model/qwen2_config.h"
#include "model/qwen2_weights.h"
#include "model/x16_cache.h"

namespace ponder {

class Qwen2Model {
 public:
  // Binds the weights of `file`, which must outlive the model. With x16 (the default unless the
  // environment sets PONDER_X16=0), matrices this CPU has x16 kernels for are copied into that
  // layout (kernels/interleave.h) using `threads` threads; without, every matrix product follows
  // llama.cpp's float order.
  // The x16 copies come from the x16 cache (model/x16_cache.h) when it has this file, and are
  // written to it in the background when it does not.
  static Expected<std::unique_ptr<Qwen2Model>> load(
      const GgufFile& file, bool x16 = x16_default(), int threads = 0,
      const X16CacheOptions& cache = x16_cache_default());
  ~Qwen2Model();  // waits for the x16 cache write
  // Whether the x16 copies were read from the x16 cache.
  bool x16_from_cache() const { return x16_from_cache_; }
  // Waits until the x16 cache file is written (tests, benchmarks of the second start).
  void wait_x16_cache_write();
  // False when PONDER_X16=0: the ggml-layout kernels and llama.cpp's float order everywhere.
  static bool x16_default();
  // Bytes of the x16 copies made at load.
  int64_t x16_copy_bytes() const { return x16_bytes_; }
  // Whether the decode kernels prefetch the weights, as measured at load (prefetch_calibration.h).
  const PrefetchCalibration& weight_prefetch_choice() const { return prefetch_; }
  // Whether bf16 attention (a bf16 cache, bf16 scores) is this CPU's default
  // (bf16_attention_choice.h).
  Bf16AttentionChoice bf16_attention_choice() const;

  // Attention in the block order (flash-style: K/V streamed in blocks, online softmax;
  // model/attention.h), the default, or in llama.cpp's non-flash order (`--flash-attn 0`). The
  // block order meets the exact rule of ../shared/golden/README.md on every golden file and is
  // the faster one at depth; llama.cpp's order reproduces its logits bit for bit
  // (docs/numerics.md).
  void set_flash_attention(bool on) { flash_attn_ = on; }
  bool flash_attention() const { return flash_attn_; }
  // The block order's bf16-scores variant (q and K rounded to bf16 for the scores: vdpbf16ps, four
  // times the multiply rate of f32 FMAs on Zen 4). The default for quantized weights (whose
  // activations llama.cpp rounds to 8 bits anyway; it meets the exact rule on every quantized
  // golden file) on CPUs that run it natively; elsewhere f32 scores (the scalar reference runs it
  // when set). With a Q8_0 K cache only when set explicitly (`--attn-scores bf16`): inside the
  // kv-q8_0 rule on every golden file, prompts at depth faster (Zen 4: +14% at 4096 and 16384),
  // decode slower (-21% at 16384: the fused decode kernel reads Q8_0 rows with f32 scores), so
  // not the default of a cache that long reasoning decodes from.
  void set_bf16_scores(bool on) { bf16_scores_ = bf16_scores_q8_0_ = on; }
  bool bf16_scores() const { return bf16_scores_; }
  // Whether a cache of K type k gets them (f16 K: when on; Q8_0 K: when set; bf16: always).
  bool bf16_scores_for(KvType k) const {
    return k == KvType::kBF16 || (k == KvType::kF16 && bf16_scores_) ||
           (k == KvType::kQ8_0 && bf16_scores_q8_0_);
  }
  // The int8-scores variant for a Q8_0 K cache (kernels/block_attention.h: q rounded to Q8_0,
  // exact integer K.q sums, llama.cpp's route for `-ctk q8_0`), not with bf16 scores. The
  // default (int8_scores_default) where its AVX512_VNNI or AVX-VNNI kernels run: on Zen 4 prompts
  // at depth 4096 1.15x and 16384 1.27x as fast as f32 scores, decode at 16384 1.02-1.07x, and as
  // far from the exact computation as llama.cpp's Q8_0 cache (F32-p1 0.0171 against its 0.0170, f32
  // scores 0.0150; BENCHMARKS.md, session 25).
  void set_int8_scores(bool on) { int8_scores_ = on; }
  bool int8_scores_default() const;
  bool int8_scores_for(KvType k) const {
    return k == KvType::kQ8_0 && int8_scores_ && !bf16_scores_for(k);
  }
  // Whether attention runs them (bf16 or int8 scores) with this model's settings.
  bool bf16_scores_in_use() const { return flash_attn_ && bf16_scores_for(kv_type_k()); }
  bool int8_scores_in_use() const { return flash_attn_ && int8_scores_for(kv_type_k()); }
  // That default for these weights on this CPU: quantized weights, and bf16 attention the
  // CPU's default (bf16_attention_choice: native and AMD's).
  bool bf16_scores_default() const;
  // The types of the caches make_cache makes. By default (use_default_kv_types) bf16 K and V where
  // the block order runs bf16 scores with the native bf16-cache kernel (the bf16 variant without a
  // conversion per block: kernels/block_attention.h), else f16. Q8_0 needs the block order and a
  // head_dim that is a multiple of 32, bf16 the block order and both K and V: checked here, so a
  // bad flag fails before any work.
  Status set_kv_types(KvType k, KvType v);
  void use_default_kv_types() { kv_default_ = true; }
  KvType kv_type_k() const { return kv_default_ ? default_kv_type() : kv_k_; }
  KvType kv_type_v() const { return kv_default_ ? default_kv_type() : kv_v_; }
  KvType default_kv_type() const;
  // How this model computes its logits beyond the file: the attention order and the KV types
  // ("block f16/f16"); part of the response cache's keys.
  std::string numerics() const;

  const Qwen2Config& config() const { return config_; }
  const Qwen2Weights& weights() const { return weights_; }

  // A cache of n_blocks blocks of block_size positions, shaped for this model.
  KvCache make_cache(int64_t n_blocks, int64_t block_size) const;

  // Runs the batch. logits: [batch.n_logit_rows(), n_vocab], in row order of the rows asking.
  // Fails (without touching the cache) on a token out of range or a position with no block.
  Status forward(const Batch& batch, KvCache& cache, float* logits, ThreadPool& pool);
  // Context shift: rotates the keys of the first n_slots positions of `block`, in every layer,
  // by `delta` positions (RoPE composes: rotating by p then by delta is rotating by p + delta),
  // rounding back to the cache's f16 as llama.cpp's shift does.
  void rotate_keys(KvCache& cache, int64_t block, int64_t n_slots, int32_t delta) const;

 private:
  Qwen2Model(Qwen2Config config, Qwen2Weights weights)
      : config_(std::move(config)), weights_(std::move(weights)) {}
  Status validate(const Batch& batch, const KvCache& cache) const;
  void reserve(int64_t n_rows);

  Qwen2Config config_;
  Qwen2Weights weights_;
  int64_t x16_bytes_ = 0;
  bool x16_from_cache_ = false;
  PrefetchCalibration prefetch_;
  std::thread x16_writer_;         // writes the x16 cache file after a cold start
  bool flash_attn_ = true;         // attention_flash, else attention_ggml_order
  bool bf16_scores_ = false;       // set at load: bf16_scores_default()
  bool bf16_scores_q8_0_ = false;  // with a Q8_0 K cache: set_bf16_scores only
  bool int8_scores_ = false;       // with a Q8_0 K cache; set at load: int8_scores_default()
  KvType kv_k_ = KvType::kF16, kv_v_ = KvType::kF16;  // when not kv_default_
  bool kv_default_ = true;

  // Activations, grown to the largest batch seen; no allocation in steady state.
  int64_t capacity_ = 0;
  std::vector<float> x_;         // [n_rows, n_embd] residual stream
  std::vector<float> xn_;        // [n_rows, n_embd] normalized
  std::vector<float> q_;         // [n_rows, n_head * head_dim]
  std::vector<float> k_;         // [n_rows, n_head_kv * head_dim]
  std::vector<float> v_;         // [n_rows, n_head_kv * head_dim]
  std::vector<float> attn_;      // [n_rows, n_head * head_dim]
  std::vector<float> proj_;      // [n_rows, n_embd]
  std::vector<float> gate_;      // [n_rows, n_ff]
  std::vector<float> up_;        // [n_rows, n_ff]
  std::vector<float> rope_cos_;  // [n_rows, head_dim / 2]
  std::vector<float> rope_sin_;  // [n_rows, head_dim / 2]
  AttentionScratch attn_scratch_;
};

}  // namespace ponder
