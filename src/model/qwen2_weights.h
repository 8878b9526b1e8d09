// Qwen2Weights: every weight of a Qwen2 model bound by name from a GGUF file, with its shape and
// type checked (a mismatch names the tensor, the expected and the actual shape). Weights stay in
// the file's storage type, pointing into the memory map.
// Depends on gguf, kernels (WeightView) and model/qwen2_config.h.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/huge_pages.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "model/qwen2_config.h"
#include "model/x16_cache.h"

namespace ponder {

struct Qwen2Layer {
  const float* attn_norm;  // [n_embd]
  WeightView wq;           // [n_head * head_dim, n_embd]
  WeightView wk;           // [n_head_kv * head_dim, n_embd]
  WeightView wv;           // [n_head_kv * head_dim, n_embd]
  const float* bq;         // [n_head * head_dim]
  const float* bk;         // [n_head_kv * head_dim]
  const float* bv;         // [n_head_kv * head_dim]
  WeightView wo;           // [n_embd, n_head * head_dim]
  const float* ffn_norm;   // [n_embd]
  WeightView w_gate;       // [n_ff, n_embd]
  WeightView w_up;         // [n_ff, n_embd]
  WeightView w_down;       // [n_embd, n_ff]
};

struct Qwen2Weights {
  WeightView token_embd;     // [n_vocab, n_embd]
  const float* output_norm;  // [n_embd]
  WeightView output;         // [n_vocab, n_embd]; token_embd when the file ties them
  bool tied_output = false;
  std::vector<Qwen2Layer> layers;

  static Expected<Qwen2Weights> bind(const GgufFile& file, const Qwen2Config& config);

  // Makes the x16 copy (kernels/interleave.h) of every matrix this CPU has an x16 kernel for, in
  // parallel on `pool`. With release_file_pages (weights in a memory-mapped file only) the copied
  // ranges of the file leave the process's resident memory (they stay in the page cache and come
  // back if read). With a cache directory (model/x16_cache.h) the copies are read from the cache
  // file of this model and layout when it is there and whole; else made, and `write_path` says
  // where the caller should write them (x16_cache_write, in the background).
  struct X16Result {
    int64_t bytes = 0;        // of the copies
    bool from_cache = false;  // read from the cache file
    std::string write_path;   // made here: the cache file to write ("" = none)
    std::string layout;       // the layout's identity, for the cache file
    const uint8_t* region = nullptr;
  };
  X16Result make_x16_copies(ThreadPool& pool, bool release_file_pages,
                            const X16CacheOptions& cache = {}, const std::string& fingerprint = "");

 private:
  std::vector<HugePages> x16_storage_;
};

}  // namespace ponder
