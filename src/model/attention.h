// Causal GQA attention of a batch's rows over the KV cache, in two float orders:
// - flash order (opt-in, `--flash-attn`): the block order of kernels/block_attention.h. Rows of one
//   sequence go in tiles of up to kFlashRows; each tile's KV positions are split into chunks of
//   kAttnChunk (fixed by position, so a long context is shared by the threads, split-K) whose
//   blocks of 16 go through an online softmax in f32, and the chunks' states are folded in order
//   (attention.cc). It meets the golden README's exact-computation rule on every file. Its
//   bf16-scores variant (q and K rounded to bf16 for the scores, vdpbf16ps) meets it on the files
//   with quantized weights.
// - ggml order (the default): llama.cpp's non-flash CPU path, operation for operation (scores for
//   all positions, softmax with one max, probabilities rounded to f16, 64-lane weighted sums), with
//   the rows of one sequence in tiles of kGgmlTileRows so that each K and V row is read once per
//   tile rather than once per row (a long prompt's rows all attend over the same cache).
// Both are batch invariant: a row's result does not depend on the other rows of its batch.
// Depends on base (thread pool), kernels (attention_kernels.h, block_attention.h) and model
// (Batch, KvCache, config).
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/batch.h"
#include "model/kv_cache.h"
#include "model/qwen2_config.h"

namespace ponder {

inline constexpr int64_t kFlashRows = 8;     // query rows of one sequence per tile
inline constexpr int64_t kGgmlTileRows = 4;  // the same for the ggml order (its per-row buffers
                                             // are larger: scores for every position)
inline constexpr int64_t kGgmlVChunk = 512;  // V positions per pass over a tile's query vectors
inline constexpr int64_t kAttnChunk = 512;   // KV positions per split-K chunk of the flash order

struct AttentionInput {
  const Qwen2Config& config;
  const Batch& batch;
  const KvCache& cache;  // already holds K and V of every row of the batch
  int64_t layer;
  const float* q;            // [n_rows, n_head * head_dim], after RoPE
  float* out;                // [n_rows, n_head * head_dim]
  bool bf16_scores = false;  // flash order: the bf16-scores variant (kernels/block_attention.h)
  bool int8_scores = false;  // flash order: the int8-scores variant (the same; a Q8_0 K cache only,
                             // never with bf16_scores: Qwen2Model::int8_scores_for)
};

// Per-thread buffers, grown on demand and kept between calls (no allocation in steady state).
struct AttentionScratch {
  struct PerThread {
    std::vector<float> floats;
    std::vector<double> doubles;
    std::vector<uint16_t> halves;
    std::vector<const uint16_t*> rows;
    std::vector<uint8_t> bytes;  // int8 scores: the queries' Q8_0 blocks and sums, a K8Block
  };
  std::vector<PerThread> threads;
  std::vector<int64_t> tiles;  // first row of each tile, then n_rows (row_tiles in attention.cc)
  std::vector<int64_t>
      chunk_begin;              // flash order: first chunk of each tile, then the number of chunks
  std::vector<float> partials;  // flash order: the chunks' softmax states when split across tasks
  // Flash order split across tasks: each (tile, KV head)'s queries, prepared once for its chunks
  // (f32, bf16, and with int8 scores their Q8_0 blocks in bytes and the blocks' sums).
  struct SplitQueries {
    std::vector<float> floats;
    std::vector<uint16_t> halves;
    std::vector<int32_t> sums;
    std::vector<uint8_t> bytes;
  } split_queries;
};

void attention_flash(const AttentionInput& in, AttentionScratch& scratch, ThreadPool& pool);
void attention_ggml_order(const AttentionInput& in, AttentionScratch& scratch, ThreadPool& pool);

}  // namespace ponder
