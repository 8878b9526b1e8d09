// ModelQuantizer: rewrites a GGUF model in a quantization mix (QuantMix). Every metadata key is
// copied in order; general.file_type becomes llama.cpp's value for the mix and
// general.quantization_version 2; split keys are dropped. Tensors keep their order and shapes;
// each gets the type choose_tensor_type picks, converted row-parallel on a ThreadPool. Inputs may
// be F32, F16 or BF16; already-quantized tensors are dequantized first (with a warning: quality
// is lost twice). The output is written to a temporary file and renamed, so a failure leaves no
// partial file.
// Depends on base, gguf and quant.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "quant/quant_mix.h"

namespace ponder {

struct TensorPlan {
  std::string name;
  std::vector<int64_t> shape;  // ggml order
  GgmlType from;
  GgmlType to;
  bool fallback = false;  // the mix's type did not fit the row length (see TensorTypeChoice)
};

class ModelQuantizer {
 public:
  // Called after each tensor is written: (index from 1, count, its plan).
  using Progress = std::function<void(size_t, size_t, const TensorPlan&)>;

  ModelQuantizer(QuantMix mix, int n_threads);

  // The model facts the mix rules need, read from the file's metadata and tensor names.
  static Expected<MixModelInfo> model_info(const GgufFile& in);

  // The output type of every tensor of `in`, in file order; fails if a tensor would need a
  // conversion from a type Ponder cannot read.
  Expected<std::vector<TensorPlan>> plan(const GgufFile& in) const;

  // Writes `in` quantized to out_path. The caller makes sure out_path is not the input.
  Status quantize(const GgufFile& in, const std::string& out_path);

  void set_progress(Progress progress) { progress_ = std::move(progress); }

 private:
  // Converts the rows of one tensor from `plan.from` (bytes at `src`) to `plan.to` into `out`.
  void convert(const TensorPlan& plan, const uint8_t* src, uint8_t* out);

  QuantMix mix_;
  ThreadPool pool_;
  Progress progress_;
};

}  // namespace ponder
