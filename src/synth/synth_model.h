// Synthetic models: random-weight GGUF files with the exact layout, hyperparameters and tokenizer
// of a DeepSeek-R1-Distill-Qwen model, so benchmarks and memory figures need no download. The speed
// of a forward pass does not depend on the weights' values, only on their shapes and types.
//
// plan_synth_model() says what a file will hold (metadata and tensor list) without touching any
// weight, so the layout of the 32B preset can be tested in a millisecond; write_synth_model()
// streams the tensors through GgufWriter one at a time (memory stays near the largest tensor).
// Weights are a pure function of (seed, tensor name, element index): the file is identical for a
// seed whatever the thread count.
// Depends on base, gguf and (when built) quant; never on kernels, model or runtime.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/ggml_type.h"
#include "gguf/gguf_file.h"
#include "gguf/gguf_value.h"
#include "quant/quant_mix.h"

namespace ponder {

// Hyperparameters of one model size (the Hugging Face config.json of the real model).
struct SynthPreset {
  std::string name;          // "1.5b"
  std::string general_name;  // "synthetic-r1-distill-qwen-1.5b"
  int64_t n_embd = 0;
  int64_t n_ff = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_vocab = 0;
  int64_t n_ctx = 0;  // max_position_embeddings
  float rope_theta = 0;
  float rms_eps = 0;
  // The vocabulary file the preset reads by default, relative to the shared dir.
  std::string default_vocab;
};

// tiny, 1.5b, 7b, 14b, 32b.
const std::vector<SynthPreset>& synth_presets();
const SynthPreset* find_synth_preset(std::string_view name);

// How a tensor's values are drawn: value = offset + scale * g, g ~ approximately N(0, 1).
struct SynthInit {
  float offset = 0;
  float scale = 0;
};

struct SynthTensor {
  std::string name;
  GgmlType type;
  std::vector<int64_t> shape;  // ggml order: shape[0] is the row length
  SynthInit init;

  int64_t n_elements() const;
  int64_t n_bytes() const;
};

struct SynthPlan {
  // Model metadata in file order; the tokenizer keys are not part of the plan (they come from the
  // vocabulary file, see synth_tokenizer_metadata).
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::vector<SynthTensor> tensors;  // in the order llama.cpp's converter writes a Qwen2 model

  int64_t n_params() const;
  int64_t n_bytes() const;  // tensor data, without alignment padding
};

// The types a matrix may be stored in: F32, F16, BF16 and the block types the quant layer can
// quantize. Norms and biases are always F32.
bool synth_supports_type(GgmlType type);

// The metadata and tensor list of a preset with matrices stored as `type`.
Expected<SynthPlan> plan_synth_model(const SynthPreset& preset, GgmlType type);
// The same with each matrix in the type `ponder quantize` gives it in `mix` (Q4_K_M: Q4_K, with
// Q6_K for output.weight and the use_more_bits layers' attn_v / ffn_down), and the mix's
// general.file_type: the layout of a file made by synth F16 + quantize, without the F16 file.
Expected<SynthPlan> plan_synth_model(const SynthPreset& preset, QuantMix mix);

// All tokenizer.* keys of `vocab`, in its order, with the token list (and types, and scores if
// any) padded to n_vocab with "[PAD<id>]" tokens of type UNUSED, as llama.cpp's converter pads a
// vocabulary that is smaller than the embedding matrix. Fails if the file has no tokenizer or more
// tokens than n_vocab.
Expected<std::vector<std::pair<std::string, GgufValue>>> synth_tokenizer_metadata(
    const GgufFile& vocab, int64_t n_vocab);

// Fills `out` (n_rows rows of the tensor's type, starting at row `row_begin`) with the tensor's
// values for `seed`. Exposed for tests; write_synth_model calls it from every thread.
void synth_fill_rows(const SynthTensor& tensor, uint64_t seed, int64_t row_begin, int64_t n_rows,
                     float* scratch /* [shape[0]] */, uint8_t* out);

struct SynthOptions {
  const SynthPreset* preset = nullptr;
  std::string output_path;
  std::string vocab_path;  // a GGUF with tokenizer.* keys
  GgmlType type = GgmlType::F16;
  std::optional<QuantMix> mix;  // set: each matrix in its type in the mix (`type` unused)
  uint64_t seed = 0;
  // > 0: only the first distinct_rows rows of each matrix are drawn (and quantized); the rest
  // repeat them (row r is row r % distinct_rows). Quantizing is ~100x slower than drawing, so the
  // 32B in Q4_K_M takes minutes instead of an hour; a forward pass's speed does not depend on the
  // values. 0: every row drawn.
  int64_t distinct_rows = 0;
  int n_threads = 0;  // 0: default_thread_count()
  // Called after each tensor is written: (tensors done, tensor count, bytes done, bytes total).
  std::function<void(size_t, size_t, int64_t, int64_t)> progress;
};

Status write_synth_model(const SynthOptions& options);

}  // namespace ponder
