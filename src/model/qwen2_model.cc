#include "model/qwen2_model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "cpu/topology.h"

#include "kernels/attention_kernels.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/ggml_math.h"
#include "kernels/ops.h"
#include "quant/half.h"

namespace ponder {
namespace {
// llama.cpp pads the KV length it attends over to 256 (masked with -inf); zeros past the f16 dot's
// 64-element step change no sum, so padding to 64 gives the same bits with less work.
constexpr int64_t kAttnPad = 64;
}  // namespace

Expected<std::unique_ptr<Qwen2Model>> Qwen2Model::load(const GgufFile& file, bool x16,
                                                      int threads) {
  PONDER_ASSIGN_OR_RETURN(Qwen2Config config, Qwen2Config::from_gguf(file));
  PONDER_ASSIGN_OR_RETURN(Qwen2Weights weights, Qwen2Weights::bind(file, config));
  std::unique_ptr<Qwen2Model> model(new Qwen2Model(std::move(config), std::move(weights)));
  if (x16) {
    ThreadPool pool(threads > 0 ? threads : cpu_topology().default_threads());
    model->x16_bytes_ = model->weights_.make_x16_copies(pool, file.is_mapped());
  }
  return model;
}

bool Qwen2Model::x16_default() {
  const char* env = std::getenv("PONDER_X16");
  return env == nullptr || std::string_view(env) != "0";
}

KvCache Qwen2Model::make_cache(int64_t n_blocks, int64_t block_size) const {
  return KvCache(config_.n_layer, config_.n_head_kv * config_.head_dim, n_blocks, block_size);
}

Status Qwen2Model::validate(const Batch& batch, const KvCache& cache) const {
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

// Causal GQA attention of every (row, head) over its sequence's cached positions 0..pos.
// The order of float operations follows llama.cpp's non-flash CPU path (q rounded to f16, f16 dot
// products, softmax over the positions padded to a multiple of 256 with -inf, probabilities
// rounded to f16, then one f16 dot per output element): the tiny golden models are chaotic, and
// any other order moves their logits by about the golden threshold.
void Qwen2Model::attention(const Batch& batch, const KvCache& cache, int64_t layer,
                           ThreadPool& pool) {
  const Qwen2Config& c = config_;
  const int64_t n_rows = static_cast<int64_t>(batch.rows.size());
  const int64_t group = c.n_head / c.n_head_kv;
  const int64_t hd = c.head_dim;
  const int64_t bs = cache.block_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  int32_t max_pos = 0;
  for (const BatchRow& r : batch.rows) max_pos = std::max(max_pos, r.pos);
  const int64_t max_pad = (max_pos + 1 + kAttnPad - 1) / kAttnPad * kAttnPad;
  // Per thread: the group's scores [group * max_pad] and exps [max_pad] f32, probabilities
  // [max_pad] f16, the group's q [group * hd] f16, the weighted-sum accumulators [64 * hd] f32;
  // and V row pointers [max_pad].
  const size_t per_thread = static_cast<size_t>((group + 1) * max_pad +
                                                (max_pad + group * hd + 1) / 2 + 64 * hd + group);
  if (scores_.size() < per_thread * pool.size()) scores_.resize(per_thread * pool.size());
  if (vrows_.size() < static_cast<size_t>(max_pad) * pool.size()) vrows_.resize(static_cast<size_t>(max_pad) * pool.size());

  const AttentionKernels& kern = attention_kernels();
  // A task is one row and one KV head with its group of query heads: each K row is read once for
  // the group. Tasks are handed out one at a time: later rows of a prompt attend over more
  // positions, so a static split would leave one thread with most of the work.
  const int64_t n_tasks = n_rows * c.n_head_kv;
  std::atomic<int64_t> next_task{0};
  pool.run([&](int ti, int) {
    float* sc = scores_.data() + per_thread * ti;                  // [group * max_pad]
    float* ex = sc + group * max_pad;                              // [max_pad]
    float* dots = ex + max_pad;                                    // [group]
    uint16_t* probs = reinterpret_cast<uint16_t*>(dots + group);   // [max_pad] f16
    uint16_t* qh = probs + max_pad;                                // [group * hd] f16
    float* acc = dots + group + (max_pad + group * hd + 1) / 2;    // [64 * hd]
    const uint16_t** vrows = vrows_.data() + static_cast<size_t>(max_pad) * ti;  // [max_pad]
    for (int64_t task = next_task.fetch_add(1, std::memory_order_relaxed); task < n_tasks;
         task = next_task.fetch_add(1, std::memory_order_relaxed)) {
      const int64_t row = task / c.n_head_kv;
      const int64_t kvh = task % c.n_head_kv;
      const BatchRow& r = batch.rows[row];
      const auto& table = batch.block_tables[r.seq];
      const int64_t n_kv = r.pos + 1;
      const int64_t n_pad = (n_kv + kAttnPad - 1) / kAttnPad * kAttnPad;
      // The group's query heads kvh * group .. + group - 1 are contiguous in q_.
      kern.scaled_to_f16(&q_[(row * c.n_head + kvh * group) * hd], 1.0f, qh, group * hd);
      for (int64_t p = 0; p < n_kv; ++p) {
        kern.dot_f16_heads(cache.k(layer, table[p / bs], p % bs) + kvh * hd, qh,
                           static_cast<int>(group), hd, dots);
        for (int64_t g = 0; g < group; ++g) sc[g * max_pad + p] = dots[g] * scale;
      }
      for (int64_t p = 0; p < n_kv; ++p) vrows[p] = cache.v(layer, table[p / bs], p % bs) + kvh * hd;
      for (int64_t g = 0; g < group; ++g) {
        float* s = sc + g * max_pad;
        std::fill(s + n_kv, s + n_pad, -INFINITY);
        const float mx = *std::max_element(s, s + n_kv);
        const float inv = static_cast<float>(1.0 / softmax_exp_sum_ggml(s, mx, n_pad, ex));
        kern.scaled_to_f16(ex, inv, probs, n_pad);
        float* out = &attn_[(row * c.n_head + kvh * group + g) * hd];
        kern.weighted_rows_f16(vrows, probs, n_kv, hd, out, acc);
      }
    }
  });
}

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
  const int64_t half = c.head_dim / 2;
  for (int64_t r = 0; r < n; ++r) rope_table(batch.rows[r].pos, c.head_dim, c.rope_theta, &rope_cos_[r * half], &rope_sin_[r * half]);

  // token embeddings
  for (int64_t r = 0; r < n; ++r) weight_row(weights_.token_embd, batch.rows[r].token, &x_[r * c.n_embd]);

  for (int64_t il = 0; il < c.n_layer; ++il) {
    const Qwen2Layer& L = weights_.layers[static_cast<size_t>(il)];

    // attention rmsnorm
    for (int64_t r = 0; r < n; ++r) rms_norm(&x_[r * c.n_embd], L.attn_norm, c.rms_eps, c.n_embd, &xn_[r * c.n_embd]);

    // qkv matmuls with bias
    const WeightView* qkv_w[] = {&L.wq, &L.wk, &L.wv};
    float* qkv_y[] = {q_.data(), k_.data(), v_.data()};
    matmul_group(qkv_w, qkv_y, 3, xn_.data(), n, pool);
    for (int64_t r = 0; r < n; ++r) {
      add_inplace(&q_[r * q_dim], L.bq, q_dim);
      add_inplace(&k_[r * kv_dim], L.bk, kv_dim);
      add_inplace(&v_[r * kv_dim], L.bv, kv_dim);
    }

    // RoPE, then K and V into the cache at each row's (sequence, position)
    for (int64_t r = 0; r < n; ++r) {
      const BatchRow& row = batch.rows[r];
      const float* rc = &rope_cos_[r * half];
      const float* rs = &rope_sin_[r * half];
      for (int64_t h = 0; h < c.n_head; ++h) rope_neox(&q_[r * q_dim + h * c.head_dim], c.head_dim, rc, rs);
      for (int64_t h = 0; h < c.n_head_kv; ++h) rope_neox(&k_[r * kv_dim + h * c.head_dim], c.head_dim, rc, rs);
      const int32_t block = batch.block_tables[row.seq][row.pos / bs];
      uint16_t* kc = cache.k(il, block, row.pos % bs);
      uint16_t* vc = cache.v(il, block, row.pos % bs);
      for (int64_t i = 0; i < kv_dim; ++i) {
        kc[i] = fp32_to_fp16(k_[r * kv_dim + i]);
        vc[i] = fp32_to_fp16(v_[r * kv_dim + i]);
      }
    }

    attention(batch, cache, il, pool);

    // output projection and residual
    matmul(L.wo, attn_.data(), n, proj_.data(), pool);
    add_inplace(x_.data(), proj_.data(), n * c.n_embd);

    // ffn rmsnorm, SwiGLU, down projection and residual
    for (int64_t r = 0; r < n; ++r) rms_norm(&x_[r * c.n_embd], L.ffn_norm, c.rms_eps, c.n_embd, &xn_[r * c.n_embd]);
    const WeightView* ffn_w[] = {&L.w_gate, &L.w_up};
    float* ffn_y[] = {gate_.data(), up_.data()};
    matmul_group(ffn_w, ffn_y, 2, xn_.data(), n, pool);
    swiglu(gate_.data(), up_.data(), n * c.n_ff, gate_.data());
    matmul(L.w_down, gate_.data(), n, proj_.data(), pool);
    add_inplace(x_.data(), proj_.data(), n * c.n_embd);
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
