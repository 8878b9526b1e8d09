#include "model/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "kernels/attention_kernels.h"
#include "kernels/block_attention.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/ggml_math.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

// llama.cpp pads the KV length it attends over to 256 (masked with -inf); zeros past the f16 dot's
// 64-element step change no sum, so padding to 64 gives the same bits with less work.
constexpr int64_t kAttnPad = 64;

template <typename T>
T* grown(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Runs task(thread, t) for t < n_tasks, handed out one at a time from the last: later rows of a
// prompt attend over more positions, so the heaviest go first and a static split would be lopsided.
template <typename Task>
void run_tasks(ThreadPool& pool, int64_t n_tasks, const Task& task) {
  std::atomic<int64_t> next{0};
  pool.run([&](int ti, int) {
    for (int64_t t = next.fetch_add(1, std::memory_order_relaxed); t < n_tasks;
         t = next.fetch_add(1, std::memory_order_relaxed)) {
      task(ti, n_tasks - 1 - t);
    }
  });
}

// Tiles: runs of up to max_rows consecutive rows of one sequence; `begin` gets their first rows
// and, last, n_rows (kept in the scratch: no allocation per layer once grown).
const std::vector<int64_t>& row_tiles(const Batch& batch, int64_t max_rows,
                                      std::vector<int64_t>& begin) {
  const int64_t n_rows = static_cast<int64_t>(batch.rows.size());
  begin.clear();
  for (int64_t r = 0; r < n_rows; ++r) {
    if (begin.empty() || batch.rows[r].seq != batch.rows[begin.back()].seq ||
        r - begin.back() == max_rows) {
      begin.push_back(r);
    }
  }
  begin.push_back(n_rows);
  return begin;
}

int64_t padded(int64_t n) { return (n + kAttnPad - 1) / kAttnPad * kAttnPad; }

}  // namespace

// The block order (kernels/block_attention.h), for one tile (rows [rb, re) of one sequence) and one
// KV head with its group of G query heads, nq = (re - rb) * G query vectors (f32, as computed):
// the positions [0, n_kv) split into chunks of kAttnChunk from 0; in each chunk the blocks of 16
// positions go in order through attend_block (every query vector sees the block's positions up to
// its row's own), each chunk from a fresh state; then the chunks' states are folded in order
// (fold_chunk) and out = O * (1 / L). The chunks depend on positions alone, never on the batch or
// the threads, so they can run in one task or in parallel with the same bits.
namespace {

int64_t padded16(int64_t n) { return (n + 15) / 16 * 16; }

// Query vectors a grouped kernel takes at once (the size of their state array; a row has 5 to 7
// on Qwen2, more go in pieces).
constexpr int64_t kMaxFusedQueries = 16;

// The state of nq query vectors over one chunk: m [nq], l [nq], acc [nq][hdp].
struct ChunkStates {
  float* m;
  float* l;
  float* acc;
};

// Folds a chunk's state of one query vector into the running one (M, L, O): the first chunk is
// copied; a chunk the query has no position in (m = -inf) is skipped.
void fold_chunk(const BlockAttentionKernels& kern, float& M, float& L, float* O, float m, float l,
                const float* acc, int64_t hdp) {
  if (m == -INFINITY) return;
  if (M == -INFINITY) {
    M = m;
    L = l;
    std::copy(acc, acc + hdp, O);
    return;
  }
  const float mx = std::max(M, m);
  const float a = exp_nonpositive(M - mx), b = exp_nonpositive(m - mx);
  L = L * a + l * b;
  kern.fold(O, acc, a, b, hdp);
  M = mx;
}

// One task's buffers: the tile's queries (f32 and, with bf16 scores, bf16), one block's K and V,
// and room for the chunk states.
struct Buffers {
  float* qf;      // [max_q][hdp]
  float* kf;      // [16][hdp]
  float* vf;      // [16][hdp]
  uint16_t* qb;   // [max_q][hdp32]
  uint16_t* kb;   // [16][hdp32]
  float* states;  // two ChunkStates, the second state_floats after the first
  // int8 scores (else null): the queries rounded to Q8_0 [max_q][hd / 32] with their blocks'
  // sums, and one block's K.
  BlockQ8_0* qq = nullptr;
  int32_t* qsum = nullptr;
  K8Block k8 = {nullptr, nullptr};
  V16Block v16 = {nullptr, nullptr};  // and with a Q8_0 V cache one block's V
};

struct BlockOrder {
  const AttentionInput& in;
  const std::vector<int64_t>& tile_begin;
  int64_t group, hd, hdp, bs;
  float scale;
  const BlockAttentionKernels& kern;
  int64_t hdp32 = 0;  // bf16 scores: hd rounded up to 32, else 0
  bool int8 = false;  // the int8-scores variant (a Q8_0 K cache)

  int64_t n_kv(int64_t tile) const {
    int64_t n = 0;
    for (int64_t r = tile_begin[tile]; r < tile_begin[tile + 1]; ++r)
      n = std::max<int64_t>(n, in.batch.rows[r].pos + 1);
    return n;
  }

  // qf [nq][hdp]: the tile's query vectors for KV head kvh, zeros past hd; with bf16 scores
  // their bf16 copies qb [nq][hdp32] too.
  void load_queries(int64_t tile, int64_t kvh, const Buffers& buf) const {
    float* qf = buf.qf;
    uint16_t* qb = buf.qb;
    const Qwen2Config& c = in.config;
    const int64_t nb = hd / kQK;
    for (int64_t r = tile_begin[tile]; r < tile_begin[tile + 1]; ++r) {
      for (int64_t h = 0; h < group; ++h) {
        const int64_t qv = (r - tile_begin[tile]) * group + h;
        const float* src = in.q + (r * c.n_head + kvh * group + h) * hd;
        float* dst = qf + qv * hdp;
        std::copy(src, src + hd, dst);
        std::fill(dst + hd, dst + hdp, 0.0f);
        if (hdp32 > 0) round_to_bf16(src, hd, hdp32, qb + qv * hdp32);
        if (int8) {
          BlockQ8_0* blocks = buf.qq + qv * nb;
          quantize_row(GgmlType::Q8_0, src, blocks, hd);
          for (int64_t b = 0; b < nb; ++b) {
            int32_t sum = 0;
            for (int8_t code : blocks[b].qs) sum += code;
            buf.qsum[qv * nb + b] = sum;
          }
        }
      }
    }
  }

  // A block's K rows of `type` to bf16 [16][hdp32].
  void convert_bf16(KvType type, const uint8_t* const* rows, int nb, uint16_t* kb) const {
    if (type == KvType::kQ8_0) {
      kern.convert_block_q8_0_bf16(rows, nb, hd, hdp32, kb);
    } else {
      kern.convert_block_bf16(reinterpret_cast<const uint16_t* const*>(rows), nb, hd, hdp32, kb);
    }
  }

  // A block's rows of `type` to f32 [16][hdp].
  void convert(KvType type, const uint8_t* const* rows, int nb, float* out) const {
    if (type == KvType::kQ8_0) {
      kern.convert_block_q8_0(rows, nb, hd, hdp, out);
    } else {
      kern.convert_block(reinterpret_cast<const uint16_t* const*>(rows), nb, hd, hdp, out);
    }
  }

  // fn(states, first query, count) over row r (of the tile)'s query states, as arrays of at most
  // kMaxFusedQueries (all of the row's on Qwen2); m and l written back after each.
  template <class Fn>
  void with_row_states(const ChunkStates& st, int64_t r, const Fn& fn) const {
    SoftmaxState states[kMaxFusedQueries];
    for (int64_t h0 = 0; h0 < group; h0 += kMaxFusedQueries) {
      const int64_t q0 = r * group + h0, n = std::min(kMaxFusedQueries, group - h0);
      for (int64_t i = 0; i < n; ++i)
        states[i] = {st.m[q0 + i], st.l[q0 + i], st.acc + (q0 + i) * hdp};
      fn(states, q0, static_cast<int>(n));
      for (int64_t i = 0; i < n; ++i) {
        st.m[q0 + i] = states[i].m;
        st.l[q0 + i] = states[i].l;
      }
    }
  }

  // fn(states, first query, count, valid) for each row of the tile (first row rb, nq query vectors)
  // that sees any of the block's positions [b0, b0 + nb).
  template <class Fn>
  void for_rows_seeing(int64_t rb, int64_t nq, int64_t b0, int nb, const ChunkStates& st,
                       const Fn& fn) const {
    for (int64_t r = 0; r * group < nq; ++r) {
      const int64_t valid = std::min<int64_t>(nb, in.batch.rows[rb + r].pos + 1 - b0);
      if (valid <= 0) continue;
      with_row_states(st, r, [&](SoftmaxState* s, int64_t q0, int n) {
        fn(s, q0, n, static_cast<int>(valid));
      });
    }
  }

  // Whether one row's query vectors (decode) can have the block's f16 V rows read directly (by a
  // kernel that takes this head size, which the caller asks).
  bool reads_f16_v_rows(int64_t nq) const {
    return nq == group && in.cache.v_type() == KvType::kF16 && hd == hdp;
  }

  // Whether one row's query vectors (decode) read the block's f16 K and V rows directly.
  bool reads_f16_rows(int64_t nq) const {
    return kern.f16_group_takes(hd) && in.cache.k_type() == KvType::kF16 && reads_f16_v_rows(nq);
  }

  // Whether one row's query vectors (decode) read the block's Q8_0 K and V rows directly.
  bool reads_q8_0_rows(int64_t nq) const {
    return kern.q8_0_group_takes(hd) && nq == group && in.cache.k_type() == KvType::kQ8_0 &&
           in.cache.v_type() == KvType::kQ8_0 && hd == hdp;
  }

  // Whether one row's query vectors (decode) read the block's Q8_0 K and V rows directly with
  // int8 scores.
  bool reads_q8_0_rows_i8(int64_t nq) const {
    return int8 && kern.q8_0_i8_group_takes(hd) && nq == group &&
           in.cache.v_type() == KvType::kQ8_0;
  }

  // Whether the kernel that attend_chunk runs for a tile of nq query vectors prefetches the next
  // block itself (spread through its work; else attend_chunk asks for it in one burst).
  bool kernel_prefetches(int64_t nq) const {
    if (in.cache.k_type() == KvType::kBF16) return kern.bf16kv_group_takes(hd);
    if (int8) return reads_q8_0_rows_i8(nq);
    return hdp32 == 0 &&
           (reads_f16_rows(nq) || reads_q8_0_rows(nq) || kern.attend_block_group != nullptr);
  }

  // One block for the tile's query vectors in the f32 block order; a row's query vectors go
  // together through a grouped kernel where there is one (the same bits).
  void attend_block_f32(int64_t rb, int64_t nq, int64_t b0, int nb, const uint8_t* const* krows,
                        const uint8_t* const* vrows, const BlockRows* next, const Buffers& buf,
                        const ChunkStates& st) const {
    // One row (decode): its query vectors read the f16 or Q8_0 rows directly, the same bits
    // (block_attention.h).
    if (reads_f16_rows(nq)) {
      for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
        kern.attend_block_f16_group(reinterpret_cast<const uint16_t* const*>(krows),
                                    reinterpret_cast<const uint16_t* const*>(vrows), valid,
                                    buf.qf + q0 * hdp, n, hdp, scale, s, q0 == 0 ? next : nullptr);
      });
      return;
    }
    if (reads_q8_0_rows(nq)) {
      for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
        kern.attend_block_q8_0_group(krows, vrows, valid, buf.qf + q0 * hdp, n, hdp, scale, s,
                                     q0 == 0 ? next : nullptr);
      });
      return;
    }
    convert(in.cache.k_type(), krows, nb, buf.kf);
    convert(in.cache.v_type(), vrows, nb, buf.vf);
    for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
      const float* q = buf.qf + q0 * hdp;
      if (kern.attend_block_group != nullptr) {
        kern.attend_block_group(buf.kf, buf.vf, valid, q, n, hdp, scale, s,
                                q0 == 0 ? next : nullptr);
        return;
      }
      for (int i = 0; i < n; ++i)
        kern.attend_block(buf.kf, buf.vf, q + i * hdp, valid, hdp, scale, s[i]);
    });
  }

  // One block for the tile's query vectors with bf16 scores: K to bf16 once, V to f32 (or read as
  // f16 rows by one row's query vectors).
  void attend_block_bf16(int64_t rb, int64_t nq, int64_t b0, int nb, const uint8_t* const* krows,
                         const uint8_t* const* vrows, const Buffers& buf,
                         const ChunkStates& st) const {
    convert_bf16(in.cache.k_type(), krows, nb, buf.kb);
    const uint16_t* kr[kAttnBlock];
    for (int p = 0; p < kAttnBlock; ++p) kr[p] = buf.kb + p * hdp32;
    const bool v_rows = kern.bf16_f16_group_takes(hd) && reads_f16_v_rows(nq);
    if (!v_rows) convert(in.cache.v_type(), vrows, nb, buf.vf);
    for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
      const uint16_t* qb = buf.qb + q0 * hdp32;
      if (v_rows) {
        kern.attend_block_bf16_f16_group(kr, reinterpret_cast<const uint16_t* const*>(vrows), valid,
                                         qb, n, hdp, hdp32, scale, s);
      } else if (kern.attend_block_bf16_group != nullptr) {
        kern.attend_block_bf16_group(kr, buf.vf, valid, qb, n, hdp, hdp32, scale, s);
      } else {
        for (int i = 0; i < n; ++i)
          kern.attend_block_bf16(buf.kb, buf.vf, qb + i * hdp32, valid, hdp, hdp32, scale, s[i]);
      }
    });
  }

  // One block for the tile's query vectors with int8 scores: one row's query vectors (decode) read
  // the Q8_0 rows through the fused kernel, else K is converted to a K8Block and V to a V16Block
  // (a Q8_0 V cache) or to f32 once for all the tile's rows (the same bits).
  void attend_block_i8(int64_t rb, int64_t nq, int64_t b0, int nb, const uint8_t* const* krows,
                       const uint8_t* const* vrows, const BlockRows* next, const Buffers& buf,
                       const ChunkStates& st) const {
    const int64_t qblocks = hd / kQK;
    auto queries = [&](int64_t q0) {
      return QueriesQ8{buf.qq + q0 * qblocks, buf.qsum + q0 * qblocks};
    };
    if (reads_q8_0_rows_i8(nq)) {
      for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
        kern.attend_block_q8_0_i8_group(krows, vrows, valid, queries(q0), n, hd, scale, s,
                                        q0 == 0 ? next : nullptr);
      });
      return;
    }
    kern.convert_block_q8_0_i8(krows, nb, hd, buf.k8);
    const ConstK8Block k8{buf.k8.codes, buf.k8.scales};
    if (in.cache.v_type() == KvType::kQ8_0) {
      kern.convert_block_q8_0_v16(vrows, nb, hd, buf.v16);
      for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
        kern.attend_block_i8_v16(k8, ConstV16Block{buf.v16.pairs, buf.v16.scales}, valid,
                                 queries(q0), n, hd, scale, s);
      });
      return;
    }
    convert(in.cache.v_type(), vrows, nb, buf.vf);
    for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
      kern.attend_block_i8(k8, buf.vf, valid, queries(q0), n, hd, scale, s);
    });
  }

  // One block of a bf16 cache for the tile's query vectors: the K and V rows read as they are (no
  // conversion), a row's query vectors together through the grouped kernel where there is one.
  void attend_block_bf16kv(int64_t rb, int64_t nq, int64_t b0, int nb, const uint8_t* const* krows,
                           const uint8_t* const* vrows, const BlockRows* next, const Buffers& buf,
                           const ChunkStates& st) const {
    const auto* kr = reinterpret_cast<const uint16_t* const*>(krows);
    const auto* vr = reinterpret_cast<const uint16_t* const*>(vrows);
    const bool grouped = kern.bf16kv_group_takes(hd);
    for_rows_seeing(rb, nq, b0, nb, st, [&](SoftmaxState* s, int64_t q0, int n, int valid) {
      const uint16_t* qb = buf.qb + q0 * hdp32;
      if (grouped) {
        kern.attend_block_bf16kv_group(kr, vr, valid, qb, n, hd, scale, s,
                                       q0 == 0 ? next : nullptr);
        return;
      }
      for (int i = 0; i < n; ++i)
        kern.attend_block_bf16kv(kr, vr, valid, qb + i * hdp32, hd, hdp32, scale, s[i]);
    });
  }

  // Asks for the K and V rows of the positions [b0, min(b0 + step, end)) (the next step) to be
  // brought into the L2 cache while the current block computes, so its first loads do not wait on
  // memory. Measured (decode at depth 16384, 2 threads, attention alone): 9-19% less time with f16
  // and Q8_0 in session 13. Now only for the kernels that do not prefetch themselves (the
  // bf16-scores path, and where no grouped kernel is built): the grouped kernels spread the same
  // lines evenly through their scores and V sums, 17-26% faster than this burst (kernels/x86,
  // Prefetch).
  void prefetch_block(int64_t kvh, std::span<const int32_t> table, int64_t b0, int64_t end,
                      int step) const {
    const int64_t k_bytes = in.cache.k_row_bytes(), v_bytes = in.cache.v_row_bytes();
    for_rows(table, kvh, b0, static_cast<int>(std::min<int64_t>(step, end - b0)),
             [&](int, const uint8_t* k, const uint8_t* v) {
               for (int64_t o = 0; o < k_bytes; o += 64) __builtin_prefetch(k + o, 0, 2);
               for (int64_t o = 0; o < v_bytes; o += 64) __builtin_prefetch(v + o, 0, 2);
             });
  }

  // f(p, K row, V row) for the positions b0 + p, p < n: one division per cache block rather than
  // per position, the slots of a (layer, block, head) being consecutive rows (kv_cache.h). With a
  // division per position attend_chunk took 8.0% of attention's samples at depth 16384, 3.6% after.
  template <class F>
  void for_rows(std::span<const int32_t> table, int64_t kvh, int64_t b0, int n, const F& f) const {
    const int64_t k_bytes = in.cache.k_row_bytes(), v_bytes = in.cache.v_row_bytes();
    for (int p = 0; p < n;) {
      const int64_t pos = b0 + p, slot = pos % bs;
      const uint8_t* k = in.cache.k_row(in.layer, table[pos / bs], kvh, slot);
      const uint8_t* v = in.cache.v_row(in.layer, table[pos / bs], kvh, slot);
      const int run = static_cast<int>(std::min<int64_t>(n - p, bs - slot));
      for (int i = 0; i < run; ++i) f(p + i, k + i * k_bytes, v + i * v_bytes);
      p += run;
    }
  }

  // The tile's query vectors over chunk `chunk`'s positions, from a fresh state into st.
  void attend_chunk(int64_t tile, int64_t kvh, int64_t chunk, const Buffers& buf,
                    const ChunkStates& st) const {
    const int64_t rb = tile_begin[tile];
    const int64_t nq = (tile_begin[tile + 1] - rb) * group;
    const auto& table = in.batch.block_tables[in.batch.rows[rb].seq];
    std::fill(st.m, st.m + nq, -INFINITY);
    std::fill(st.l, st.l + nq, 0.0f);
    std::fill(st.acc, st.acc + nq * hdp, 0.0f);
    const int64_t end = std::min(n_kv(tile), (chunk + 1) * kAttnChunk);
    // Positions per kernel call: a block, or two for the bf16 cache's steps (block_attention.h).
    const int step = in.cache.k_type() == KvType::kBF16 ? kAttnStepBf16 : kAttnBlock;
    const uint8_t* krows[kAttnStepBf16];
    const uint8_t* vrows[kAttnStepBf16];
    const bool kernel_prefetches = this->kernel_prefetches(nq);
    BlockRows next;
    const BlockRows* ahead = nullptr;  // the step after b0 when full and the kernel prefetches it
    for (int64_t b0 = chunk * kAttnChunk; b0 < end; b0 += step) {
      const int nb = static_cast<int>(std::min<int64_t>(step, end - b0));
      if (ahead != nullptr) {  // the previous step's next: its rows already looked up
        std::copy(next.k, next.k + step, krows);
        std::copy(next.v, next.v + step, vrows);
      } else {
        for_rows(table, kvh, b0, nb, [&](int p, const uint8_t* k, const uint8_t* v) {
          krows[p] = k;
          vrows[p] = v;
        });
      }
      // The grouped kernels prefetch a full next block themselves, spread through their work.
      ahead = nullptr;
      if (!kernel_prefetches) {
        prefetch_block(kvh, table, b0 + step, end, step);
      } else if (b0 + 2 * step <= end) {
        for_rows(table, kvh, b0 + step, step, [&](int p, const uint8_t* k, const uint8_t* v) {
          next.k[p] = k;
          next.v[p] = v;
        });
        next.k_bytes = in.cache.k_row_bytes();
        next.v_bytes = in.cache.v_row_bytes();
        ahead = &next;
      }
      if (in.cache.k_type() == KvType::kBF16) {
        attend_block_bf16kv(rb, nq, b0, nb, krows, vrows, ahead, buf, st);
      } else if (int8) {
        attend_block_i8(rb, nq, b0, nb, krows, vrows, ahead, buf, st);
      } else if (hdp32 > 0) {
        attend_block_bf16(rb, nq, b0, nb, krows, vrows, buf, st);
      } else {
        attend_block_f32(rb, nq, b0, nb, krows, vrows, ahead, buf, st);
      }
    }
  }

  void write_out(int64_t tile, int64_t kvh, const ChunkStates& st) const {
    const Qwen2Config& c = in.config;
    const int64_t rb = tile_begin[tile];
    const int64_t nq = (tile_begin[tile + 1] - rb) * group;
    for (int64_t qv = 0; qv < nq; ++qv) {
      const int64_t r = rb + qv / group;
      float* out = in.out + (r * c.n_head + kvh * group + qv % group) * hd;
      const float inv = 1.0f / st.l[qv];
      for (int64_t i = 0; i < hd; ++i) out[i] = st.acc[qv * hdp + i] * inv;
    }
  }
};

}  // namespace

void attention_flash(const AttentionInput& in, AttentionScratch& scratch, ThreadPool& pool) {
  const Qwen2Config& c = in.config;
  const int64_t group = c.n_head / c.n_head_kv;
  const std::vector<int64_t>& tile_begin = row_tiles(in.batch, kFlashRows, scratch.tiles);
  const int64_t n_tiles = static_cast<int64_t>(tile_begin.size()) - 1;
  const BlockOrder order{
      in,
      tile_begin,
      group,
      c.head_dim,
      padded16(c.head_dim),
      in.cache.block_size(),
      1.0f / std::sqrt(static_cast<float>(c.head_dim)),
      block_attention_kernels(),
      in.bf16_scores || in.cache.k_type() == KvType::kBF16 ? (c.head_dim + 31) / 32 * 32 : 0,
      in.int8_scores};
  const int64_t hdp = order.hdp, hdp32 = order.hdp32;
  const int64_t max_q = kFlashRows * group;
  const int64_t state_floats = max_q * (hdp + 2);  // one ChunkStates
  if (scratch.threads.size() < static_cast<size_t>(pool.size()))
    scratch.threads.resize(static_cast<size_t>(pool.size()));
  auto states_at = [&](float* base) { return ChunkStates{base, base + max_q, base + 2 * max_q}; };
  // Per thread: the Buffers in its scratch.
  auto thread_buffers = [&](int ti) {
    AttentionScratch::PerThread& t = scratch.threads[static_cast<size_t>(ti)];
    float* f =
        grown(t.floats, static_cast<size_t>(max_q * hdp + 2 * kAttnBlock * hdp + 2 * state_floats));
    uint16_t* h = grown(t.halves, static_cast<size_t>(max_q * hdp32 + kAttnBlock * hdp32));
    Buffers buf{f, f + max_q * hdp,   f + max_q * hdp + kAttnBlock * hdp,
                h, h + max_q * hdp32, f + max_q * hdp + 2 * kAttnBlock * hdp};
    if (order.int8) {  // 64-byte aligned pieces: the K8Block's codes and scales, the V16Block's
                       // pairs and scales, then the queries'
      const int64_t qblocks = max_q * (c.head_dim / kQK);
      const int64_t codes = c.head_dim * kAttnBlock, scales = c.head_dim / kQK * kAttnBlock * 4;
      const int64_t pairs = 2 * codes, sums = (qblocks * 4 + 63) / 64 * 64;
      uint8_t* raw = grown(t.bytes, static_cast<size_t>(64 + codes + scales + pairs + scales +
                                                        sums + qblocks * sizeof(BlockQ8_0)));
      uint8_t* base = raw + (64 - reinterpret_cast<uintptr_t>(raw) % 64) % 64;
      buf.k8 = K8Block{base, reinterpret_cast<float*>(base + codes)};
      uint8_t* v16 = base + codes + scales;
      buf.v16 = V16Block{reinterpret_cast<int16_t*>(v16), reinterpret_cast<float*>(v16 + pairs)};
      uint8_t* queries = v16 + pairs + scales;
      buf.qsum = reinterpret_cast<int32_t*>(queries);
      buf.qq = reinterpret_cast<BlockQ8_0*>(queries + sums);
    }
    return buf;
  };

  // chunk_begin[t]: the first chunk of tile t in a numbering of all the tiles' chunks.
  std::vector<int64_t>& chunk_begin = scratch.chunk_begin;
  chunk_begin.assign(static_cast<size_t>(n_tiles + 1), 0);
  for (int64_t t = 0; t < n_tiles; ++t) {
    chunk_begin[t + 1] = chunk_begin[t] + (order.n_kv(t) + kAttnChunk - 1) / kAttnChunk;
  }
  const int64_t n_chunks = chunk_begin[n_tiles];
  const int64_t n_tasks = n_tiles * c.n_head_kv;

  if (n_tasks >= 4 * pool.size() || n_chunks == n_tiles) {
    // Enough tiles to keep every thread busy: a task runs its tile's chunks in order.
    run_tasks(pool, n_tasks, [&](int ti, int64_t task) {
      const int64_t tile = task / c.n_head_kv, kvh = task % c.n_head_kv;
      const Buffers buf = thread_buffers(ti);
      const ChunkStates run = states_at(buf.states);
      const ChunkStates part = states_at(buf.states + state_floats);
      const int64_t nq = (tile_begin[tile + 1] - tile_begin[tile]) * group;
      order.load_queries(tile, kvh, buf);
      order.attend_chunk(tile, kvh, 0, buf, run);
      for (int64_t ch = 1; ch < chunk_begin[tile + 1] - chunk_begin[tile]; ++ch) {
        order.attend_chunk(tile, kvh, ch, buf, part);
        for (int64_t qv = 0; qv < nq; ++qv) {
          fold_chunk(order.kern, run.m[qv], run.l[qv], run.acc + qv * hdp, part.m[qv], part.l[qv],
                     part.acc + qv * hdp, hdp);
        }
      }
      order.write_out(tile, kvh, run);
    });
    return;
  }

  // Few tiles over long contexts (decode): every chunk its own task (split-K), then the folds.
  float* partials =
      grown(scratch.partials, static_cast<size_t>(n_chunks * c.n_head_kv * state_floats));
  auto slot = [&](int64_t chunk_index, int64_t kvh) {
    return states_at(partials + (chunk_index * c.n_head_kv + kvh) * state_floats);
  };
  // Each (tile, KV head)'s queries prepared once for all its chunks' tasks (rounded per chunk,
  // the int8 scores' quantize_row took 7% of decode at depth 16384).
  const int64_t qblocks = max_q * (c.head_dim / kQK);
  float* split_qf = grown(scratch.split_queries.floats, static_cast<size_t>(n_tasks * max_q * hdp));
  uint16_t* split_qb =
      grown(scratch.split_queries.halves, static_cast<size_t>(n_tasks * max_q * hdp32));
  int32_t* split_qsum = grown(scratch.split_queries.sums, static_cast<size_t>(n_tasks * qblocks));
  auto* split_qq = reinterpret_cast<BlockQ8_0*>(grown(
      scratch.split_queries.bytes, static_cast<size_t>(n_tasks * qblocks) * sizeof(BlockQ8_0)));
  auto with_split_queries = [&](Buffers buf, int64_t task) {
    buf.qf = split_qf + task * max_q * hdp;
    buf.qb = split_qb + task * max_q * hdp32;
    if (order.int8) {
      buf.qsum = split_qsum + task * qblocks;
      buf.qq = split_qq + task * qblocks;
    }
    return buf;
  };
  for (int64_t task = 0; task < n_tasks; ++task) {
    order.load_queries(task / c.n_head_kv, task % c.n_head_kv, with_split_queries({}, task));
  }
  run_tasks(pool, n_chunks * c.n_head_kv, [&](int ti, int64_t task) {
    const int64_t chunk_index = task / c.n_head_kv, kvh = task % c.n_head_kv;
    const int64_t tile = std::upper_bound(chunk_begin.begin(), chunk_begin.end(), chunk_index) -
                         chunk_begin.begin() - 1;
    const Buffers buf = with_split_queries(thread_buffers(ti), tile * c.n_head_kv + kvh);
    order.attend_chunk(tile, kvh, chunk_index - chunk_begin[tile], buf, slot(chunk_index, kvh));
  });
  run_tasks(pool, n_tasks, [&](int, int64_t task) {
    const int64_t tile = task / c.n_head_kv, kvh = task % c.n_head_kv;
    const int64_t nq = (tile_begin[tile + 1] - tile_begin[tile]) * group;
    const ChunkStates run = slot(chunk_begin[tile], kvh);
    for (int64_t ch = chunk_begin[tile] + 1; ch < chunk_begin[tile + 1]; ++ch) {
      const ChunkStates part = slot(ch, kvh);
      for (int64_t qv = 0; qv < nq; ++qv) {
        fold_chunk(order.kern, run.m[qv], run.l[qv], run.acc + qv * hdp, part.m[qv], part.l[qv],
                   part.acc + qv * hdp, hdp);
      }
    }
    order.write_out(tile, kvh, run);
  });
}

// llama.cpp's non-flash CPU path, operation for operation: q rounded to f16, f16 dot products,
// softmax over the positions padded to a multiple of 256 with -inf, probabilities rounded to f16,
// then one f16 dot per output element. A task is a tile of rows of one sequence and one KV head
// with its group of query heads: each K row is read once for the tile's nq query vectors, and the
// V rows go in chunks of kGgmlVChunk positions, each chunk added into every query vector's lane
// accumulators while it is in cache. Every query vector's operations are those it would have
// alone, so the result does not depend on the tile (batch invariance).
void attention_ggml_order(const AttentionInput& in, AttentionScratch& scratch, ThreadPool& pool) {
  const Qwen2Config& c = in.config;
  const Batch& batch = in.batch;
  const int64_t group = c.n_head / c.n_head_kv;
  const int64_t hd = c.head_dim;
  const int64_t bs = in.cache.block_size();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const std::vector<int64_t>& tile_begin = row_tiles(batch, kGgmlTileRows, scratch.tiles);
  const int64_t n_tiles = static_cast<int64_t>(tile_begin.size()) - 1;
  int32_t max_pos = 0;
  for (const BatchRow& r : batch.rows) max_pos = std::max(max_pos, r.pos);
  const int64_t max_pad = padded(max_pos + 1);
  const int64_t max_q = kGgmlTileRows * group;
  if (scratch.threads.size() < static_cast<size_t>(pool.size()))
    scratch.threads.resize(static_cast<size_t>(pool.size()));

  const AttentionKernels& kern = attention_kernels();
  run_tasks(pool, n_tiles * c.n_head_kv, [&](int ti, int64_t task) {
    const int64_t tile = task / c.n_head_kv;
    const int64_t kvh = task % c.n_head_kv;
    const int64_t rb = tile_begin[tile], re = tile_begin[tile + 1];
    const int64_t nq = (re - rb) * group;
    const auto& table = batch.block_tables[batch.rows[rb].seq];
    AttentionScratch::PerThread& st = scratch.threads[static_cast<size_t>(ti)];
    float* sc =
        grown(st.floats, static_cast<size_t>(max_q * max_pad + max_pad + max_q + max_q * 64 * hd));
    float* ex = sc + max_q * max_pad;  // [max_pad] exps of one query vector
    float* dots = ex + max_pad;        // [nq] one K row against every query vector
    float* acc = dots + max_q;         // [nq][64 * hd] lane accumulators
    uint16_t* probs = grown(st.halves, static_cast<size_t>(max_q * max_pad + max_q * hd));
    uint16_t* qh = probs + max_q * max_pad;  // [nq][hd] f16
    const uint16_t** vrows = grown(st.rows, static_cast<size_t>(max_pad));

    int64_t n_kv = 0;  // positions the tile's last-placed row sees
    for (int64_t r = rb; r < re; ++r) {
      // The group's query heads kvh * group .. + group - 1 are contiguous in q.
      kern.scaled_to_f16(in.q + (r * c.n_head + kvh * group) * hd, 1.0f, qh + (r - rb) * group * hd,
                         group * hd);
      n_kv = std::max<int64_t>(n_kv, batch.rows[r].pos + 1);
    }
    // Scores sc[qv * max_pad + p]; a row's positions past its own are computed and never used.
    for (int64_t p = 0; p < n_kv; ++p) {
      kern.dot_f16_heads(in.cache.k(in.layer, table[p / bs], kvh, p % bs), qh, static_cast<int>(nq),
                         hd, dots);
      for (int64_t qv = 0; qv < nq; ++qv) sc[qv * max_pad + p] = dots[qv] * scale;
      vrows[p] = in.cache.v(in.layer, table[p / bs], kvh, p % bs);
    }
    for (int64_t qv = 0; qv < nq; ++qv) {
      const int64_t n_row = batch.rows[rb + qv / group].pos + 1;
      float* s = sc + qv * max_pad;
      std::fill(s + n_row, s + padded(n_row), -INFINITY);
      const float mx = *std::max_element(s, s + n_row);
      const float inv = static_cast<float>(1.0 / softmax_exp_sum_ggml(s, mx, padded(n_row), ex));
      kern.scaled_to_f16(ex, inv, probs + qv * max_pad, padded(n_row));
    }
    std::fill(acc, acc + nq * 64 * hd, 0.0f);
    for (int64_t c0 = 0; c0 < n_kv; c0 += kGgmlVChunk) {
      for (int64_t qv = 0; qv < nq; ++qv) {
        const int64_t n_row = batch.rows[rb + qv / group].pos + 1;
        const int64_t c1 = std::min(c0 + kGgmlVChunk, n_row);
        if (c1 > c0)
          kern.accumulate_rows_f16(vrows, probs + qv * max_pad, c0, c1, hd, acc + qv * 64 * hd);
      }
    }
    for (int64_t qv = 0; qv < nq; ++qv) {
      const int64_t r = rb + qv / group;
      kern.reduce_lanes_f16(acc + qv * 64 * hd, hd,
                            in.out + (r * c.n_head + kvh * group + qv % group) * hd);
    }
  });
}

}  // namespace ponder
