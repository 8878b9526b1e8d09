#include "model/qwen2_model.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "cpu/topology.h"
#include "gguf/model_fingerprint.h"
#include "kernels/block_attention.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/ggml_math.h"
#include "kernels/ops.h"
#include "model/attention.h"
#include "model/bf16_attention_choice.h"
#include "model/prefetch_calibration.h"
#include "quant/half.h"

namespace ponder {

Expected<std::unique_ptr<Qwen2Model>> Qwen2Model::load(const GgufFile& file, bool x16, int threads,
                                                       const X16CacheOptions& cache) {
  PONDER_ASSIGN_OR_RETURN(Qwen2Config config, Qwen2Config::from_gguf(file));
  PONDER_ASSIGN_OR_RETURN(Qwen2Weights weights, Qwen2Weights::bind(file, config));
  std::unique_ptr<Qwen2Model> model(new Qwen2Model(std::move(config), std::move(weights)));
  model->bf16_scores_ = model->bf16_scores_default();
  model->int8_scores_ = model->int8_scores_default();
  if (x16) {
    ThreadPool pool(threads > 0 ? threads : cpu_topology().default_threads());
    const std::string fingerprint = cache.dir.empty() ? "" : model_fingerprint(file);
    Qwen2Weights::X16Result r =
        model->weights_.make_x16_copies(pool, file.is_mapped(), cache, fingerprint);
    model->x16_bytes_ = r.bytes;
    model->x16_from_cache_ = r.from_cache;
    model->prefetch_ = calibrate_weight_prefetch(model->weights_, pool);
    if (!r.write_path.empty()) {
      model->x16_writer_ = std::thread([r, fingerprint, cache] {
        if (x16_cache_make_room(cache, r.write_path, r.bytes))
          x16_cache_write(r.write_path, fingerprint, r.layout, r.region, r.bytes);
      });
    }
  }
  return model;
}

Qwen2Model::~Qwen2Model() { wait_x16_cache_write(); }

void Qwen2Model::wait_x16_cache_write() {
  if (x16_writer_.joinable()) x16_writer_.join();
}

bool Qwen2Model::x16_default() {
  const char* env = std::getenv("PONDER_X16");
  return env == nullptr || std::string_view(env) != "0";
}

KvCache Qwen2Model::make_cache(int64_t n_blocks, int64_t block_size) const {
  return KvCache(config_.n_layer, config_.n_head_kv, config_.head_dim, n_blocks, block_size,
                 kv_type_k(), kv_type_v());
}

Status Qwen2Model::set_kv_types(KvType k, KvType v) {
  if (k == KvType::kQ8_0 || v == KvType::kQ8_0) {
    if (config_.head_dim % 32 != 0) {
      return Status::errorf(
          "a Q8_0 KV cache needs a head size that is a multiple of 32 (this model's: {})",
          config_.head_dim);
    }
  }
  if ((k == KvType::kBF16) != (v == KvType::kBF16)) {
    return Status::error(
        "a bf16 KV cache takes K and V together (--cache-type-k bf16 --cache-type-v bf16)");
  }
  kv_k_ = k;
  kv_v_ = v;
  kv_default_ = false;
  return Status::ok();
}

KvType Qwen2Model::default_kv_type() const {
  const bool native = block_attention_kernels().bf16kv_group_takes(config_.head_dim);
  return flash_attn_ && bf16_scores_ && native ? KvType::kBF16 : KvType::kF16;
}

bool Qwen2Model::int8_scores_default() const {
  return block_attention_kernels().q8_0_i8_group_takes(config_.head_dim);
}

bool Qwen2Model::bf16_scores_default() const {
  const GgmlType t = weights_.layers.empty() ? GgmlType::F32 : weights_.layers[0].wq.type;
  const bool quantized = t != GgmlType::F32 && t != GgmlType::F16 && t != GgmlType::BF16;
  return quantized && bf16_attention_choice().bf16;  // the choice implies the native kernels
}

Bf16AttentionChoice Qwen2Model::bf16_attention_choice() const {
  return ponder::bf16_attention_choice(config_.head_dim);
}

std::string Qwen2Model::numerics() const {
  return fmt::format("{} {}/{}",
                     !flash_attn_                   ? "ggml"
                     : kv_type_k() == KvType::kBF16 ? "block-bf16kv"
                     : bf16_scores_in_use()         ? "block-bf16qk"
                     : int8_scores_in_use()
                         ? (kv_type_v() == KvType::kQ8_0 ? "block-i8qk-i16v" : "block-i8qk")
                         : "block",
                     kv_type_name(kv_type_k()), kv_type_name(kv_type_v()));
}

Status Qwen2Model::validate(const Batch& batch, const KvCache& cache) const {
  if (!flash_attn_ && (cache.k_type() != KvType::kF16 || cache.v_type() != KvType::kF16)) {
    return Status::errorf("a {}/{} KV cache needs the block order of attention (--flash-attn 1)",
                          kv_type_name(cache.k_type()), kv_type_name(cache.v_type()));
  }
  if ((cache.k_type() == KvType::kBF16) != (cache.v_type() == KvType::kBF16)) {
    return Status::error("a bf16 KV cache takes K and V together");
  }
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const BatchRow& r = batch.rows[i];
    if (r.token < 0 || r.token >= config_.n_vocab) {
      return Status::errorf("batch row {}: token {} is outside the vocabulary [0, {})", i, r.token,
                            config_.n_vocab);
    }
    if (r.seq < 0 || static_cast<size_t>(r.seq) >= batch.block_tables.size()) {
      return Status::errorf("batch row {}: sequence {} has no block table", i, r.seq);
    }
    const auto& table = batch.block_tables[static_cast<size_t>(r.seq)];
    if (r.pos < 0 || r.pos / cache.block_size() >= static_cast<int64_t>(table.size())) {
      return Status::errorf("batch row {}: position {} has no KV block (sequence {} has {} blocks)",
                            i, r.pos, r.seq, table.size());
    }
    for (int32_t b : table) {
      if (b < 0 || b >= cache.n_blocks()) {
        return Status::errorf("sequence {}: block {} is outside the cache", r.seq, b);
      }
    }
  }
  return Status::ok();
}

void Qwen2Model::reserve(int64_t n) {
  if (n <= capacity_) return;
  const Qwen2Config& c = config_;
  const auto sz = [n](int64_t width) { return static_cast<size_t>(n * width); };
  x_.resize(sz(c.n_embd));
  xn_.resize(sz(c.n_embd));
  q_.resize(sz(c.n_head * c.head_dim));
  k_.resize(sz(c.n_head_kv * c.head_dim));
  v_.resize(sz(c.n_head_kv * c.head_dim));
  attn_.resize(sz(c.n_head * c.head_dim));
  proj_.resize(sz(c.n_embd));
  gate_.resize(sz(c.n_ff));
  up_.resize(sz(c.n_ff));
  rope_cos_.resize(sz(c.head_dim / 2));
  rope_sin_.resize(sz(c.head_dim / 2));
  capacity_ = n;
}

namespace {

// Rows at which the per-row work (norms, biases, RoPE, the cache stores, SwiGLU, residuals) goes
// over the pool: below it waking the pool costs more than the work; above it, on one thread, that
// work held the other threads idle for ~5% of a prompt's time.
constexpr int64_t kRowsForPool = 16;

// f(begin, end) over the rows [0, n), split over the pool when there are enough of them. Every
// row's operations are the same however they are split (batch invariance).
template <class F>
void for_rows(ThreadPool& pool, int64_t n, const F& f) {
  if (n < kRowsForPool) {
    f(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, 1, [&](int64_t begin, int64_t end) { f(begin, end); });
}

}  // namespace

Status Qwen2Model::forward(const Batch& batch, KvCache& cache, float* logits, ThreadPool& pool) {
  PONDER_RETURN_IF_ERROR(validate(batch, cache));
  const Qwen2Config& c = config_;
  const int64_t n = static_cast<int64_t>(batch.rows.size());
  if (n == 0) return Status::ok();
  reserve(n);
  const int64_t q_dim = c.n_head * c.head_dim;
  const int64_t kv_dim = c.n_head_kv * c.head_dim;
  const int64_t bs = cache.block_size();

  // rotary angles of each row's position, shared by all heads and layers
  // and the token embeddings
  const int64_t half = c.head_dim / 2;
  for_rows(pool, n, [&](int64_t rb, int64_t re) {
    for (int64_t r = rb; r < re; ++r) {
      rope_table(batch.rows[r].pos, c.head_dim, c.rope_theta, &rope_cos_[r * half],
                 &rope_sin_[r * half]);
      weight_row(weights_.token_embd, batch.rows[r].token, &x_[r * c.n_embd]);
    }
  });
  // rms_norm of every row of x_ into xn_
  auto norm_rows = [&](const float* weight) {
    for_rows(pool, n, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r)
        rms_norm(&x_[r * c.n_embd], weight, c.rms_eps, c.n_embd, &xn_[r * c.n_embd]);
    });
  };
  // x_ += proj_, the residual
  auto add_proj = [&] {
    for_rows(pool, n, [&](int64_t rb, int64_t re) {
      add_inplace(&x_[rb * c.n_embd], &proj_[rb * c.n_embd], (re - rb) * c.n_embd);
    });
  };

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const Qwen2Layer& L = weights_.layers[static_cast<size_t>(il)];

    // attention rmsnorm
    norm_rows(L.attn_norm);

    // qkv matmuls with bias
    const WeightView* qkv_w[] = {&L.wq, &L.wk, &L.wv};
    float* qkv_y[] = {q_.data(), k_.data(), v_.data()};
    matmul_group(qkv_w, qkv_y, 3, xn_.data(), n, pool);

    // the biases, RoPE, then K and V into the cache at each row's (sequence, position)
    for_rows(pool, n, [&](int64_t rb, int64_t re) {
      for (int64_t r = rb; r < re; ++r) {
        add_inplace(&q_[r * q_dim], L.bq, q_dim);
        add_inplace(&k_[r * kv_dim], L.bk, kv_dim);
        add_inplace(&v_[r * kv_dim], L.bv, kv_dim);
        const BatchRow& row = batch.rows[r];
        const float* rc = &rope_cos_[r * half];
        const float* rs = &rope_sin_[r * half];
        for (int64_t h = 0; h < c.n_head; ++h)
          rope_neox(&q_[r * q_dim + h * c.head_dim], c.head_dim, rc, rs);
        for (int64_t h = 0; h < c.n_head_kv; ++h)
          rope_neox(&k_[r * kv_dim + h * c.head_dim], c.head_dim, rc, rs);
        const int32_t block = batch.block_tables[row.seq][row.pos / bs];
        for (int64_t h = 0; h < c.n_head_kv; ++h) {
          cache.store_k(il, block, h, row.pos % bs, &k_[r * kv_dim + h * c.head_dim]);
          cache.store_v(il, block, h, row.pos % bs, &v_[r * kv_dim + h * c.head_dim]);
        }
      }
    });

    const AttentionInput attn_in{c,
                                 batch,
                                 cache,
                                 il,
                                 q_.data(),
                                 attn_.data(),
                                 bf16_scores_for(cache.k_type()),
                                 int8_scores_for(cache.k_type())};
    if (flash_attn_) {
      attention_flash(attn_in, attn_scratch_, pool);
    } else {
      attention_ggml_order(attn_in, attn_scratch_, pool);
    }

    // output projection and residual
    matmul(L.wo, attn_.data(), n, proj_.data(), pool);
    add_proj();

    // ffn rmsnorm, SwiGLU, down projection and residual
    norm_rows(L.ffn_norm);
    const WeightView* ffn_w[] = {&L.w_gate, &L.w_up};
    float* ffn_y[] = {gate_.data(), up_.data()};
    matmul_group(ffn_w, ffn_y, 2, xn_.data(), n, pool);
    for_rows(pool, n, [&](int64_t rb, int64_t re) {
      swiglu(&gate_[rb * c.n_ff], &up_[rb * c.n_ff], (re - rb) * c.n_ff, &gate_[rb * c.n_ff]);
    });
    matmul(L.w_down, gate_.data(), n, proj_.data(), pool);
    add_proj();
  }

  // final norm and logits, only for the rows that ask
  int64_t n_out = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (!batch.rows[r].logits) continue;
    rms_norm(&x_[r * c.n_embd], weights_.output_norm, c.rms_eps, c.n_embd, &xn_[n_out * c.n_embd]);
    ++n_out;
  }
  if (n_out > 0) matmul(weights_.output, xn_.data(), n_out, logits, pool);
  return Status::ok();
}

}  // namespace ponder

namespace ponder {

void Qwen2Model::rotate_keys(KvCache& cache, int64_t block, int64_t n_slots, int32_t delta) const {
  const Qwen2Config& c = config();
  const int64_t half = c.head_dim / 2;
  std::vector<float> cos_t(static_cast<size_t>(half)), sin_t(static_cast<size_t>(half));
  std::vector<float> k(static_cast<size_t>(c.head_dim));  // [head_dim]
  rope_table(delta, c.head_dim, c.rope_theta, cos_t.data(), sin_t.data());
  for (int64_t l = 0; l < c.n_layer; ++l) {
    for (int64_t slot = 0; slot < n_slots; ++slot) {
      for (int64_t h = 0; h < c.n_head_kv; ++h) {
        cache.load_k(l, block, h, slot, k.data());
        rope_neox(k.data(), c.head_dim, cos_t.data(), sin_t.data());
        cache.store_k(l, block, h, slot, k.data());
      }
    }
  }
}

}  // namespace ponder
