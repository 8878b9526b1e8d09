// export_hf: the reverse of HfConverter, GGUF (Qwen2, F32/F16/BF16 tensors) -> a Hugging Face
// folder: model.safetensors (or shards + model.safetensors.index.json), config.json,
// tokenizer.json and tokenizer_config.json. It exists so that the converter can be tested on a
// round trip (GGUF -> HF -> GGUF must give the same file contents), and to hand a GGUF model to
// Hugging Face tools. Tensors are copied bit for bit; quantized tensors are refused.
// Depends on base, gguf and the convert writers.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace ponder {

struct ExportOptions {
  int64_t max_shard_bytes = 0;  // 0: one model.safetensors; else shards of at most this size
  bool merges_as_pairs = true;  // tokenizer.json merges as ["a", "b"] (new form) or "a b"
  bool vocab_only = false;      // no safetensors
};

// Writes the folder `dir` (created if missing; existing files are replaced).
Status export_hf(const GgufFile& in, const std::string& dir, const ExportOptions& options = {});

}  // namespace ponder
