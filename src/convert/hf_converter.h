// HfConverter: a Hugging Face Qwen2ForCausalLM folder (safetensors + config.json + tokenizer.json
// + tokenizer_config.json) -> one GGUF file with the keys, tensor names, shapes and tokenizer
// layout llama.cpp's convert_hf_to_gguf.py writes. Tensors are streamed: each is converted from
// the memory-mapped shard straight into the writer's one-tensor buffer, row-parallel on a pool.
// 1-D tensors (norms, biases) are F32; matrices are the chosen type (F16 by default); a copy in
// the source's own dtype is bit-exact. The output appears only when complete (temp + rename).
// Depends on base, gguf, quant and the convert readers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "convert/hf_config.h"
#include "convert/hf_vocab.h"
#include "convert/safetensors.h"
#include "gguf/ggml_type.h"

namespace ponder {

struct ConvertOptions {
  GgmlType type = GgmlType::F16;  // for matrices: F32, F16, BF16 or Q8_0
  std::string name;               // general.name; default: config's _name_or_path, else the folder
  bool vocab_only = false;  // metadata and tokenizer only, no tensors (llama.cpp --vocab-only)
  int n_threads = 0;        // 0: default_thread_count()
};

// One output tensor: where it comes from and what it becomes.
struct ConvertPlan {
  std::string hf_name;         // "model.layers.0.self_attn.q_proj.weight"
  std::string name;            // "blk.0.attn_q.weight"
  std::vector<int64_t> shape;  // ggml order
  const StTensor* src = nullptr;
  GgmlType type = GgmlType::F32;
};

// llama.cpp's general.file_type for an output type (F32 0, F16 1, Q8_0 7, BF16 32).
uint32_t llama_file_type(GgmlType type);

// The GGUF name of an HF Qwen2 tensor name, or "" if it has none.
std::string gguf_tensor_name(const std::string& hf_name);
// The reverse (for the export): "" for a name that is not a Qwen2 tensor.
std::string hf_tensor_name(const std::string& gguf_name);

class HfConverter {
 public:
  // (index from 1, count, the tensor) after each tensor is written.
  using Progress = std::function<void(size_t, size_t, const ConvertPlan&)>;

  explicit HfConverter(ConvertOptions options);

  // Reads and checks everything in `dir` (config, tokenizer, every tensor's name, dtype and
  // shape) before anything is written.
  Status open(const std::string& dir);

  const HfConfig& config() const { return config_; }
  const HfVocab& vocab() const { return vocab_; }
  const std::vector<ConvertPlan>& plan() const { return plan_; }
  int64_t output_bytes() const;  // tensor data of the output

  // Writes the GGUF; the caller makes sure out_path is not inside the input.
  Status write(const std::string& out_path);

  void set_progress(Progress progress) { progress_ = std::move(progress); }

 private:
  Status make_plan();
  void convert(const ConvertPlan& p, uint8_t* out);
  void convert_rows(const ConvertPlan& p, uint8_t* out);

  ConvertOptions options_;
  std::string dir_;
  HfConfig config_;
  HfVocab vocab_;
  SafetensorsSet tensors_;
  std::vector<ConvertPlan> plan_;
  ThreadPool pool_;
  Progress progress_;
};

}  // namespace ponder
