// Matrix products of a weight tensor (any storage type, straight from the mapped file) with f32
// activations. This is the reference path: activation rows are rounded to the weight type's
// companion type and each output is a scalar row dot in llama.cpp's float order
// (dot_ggml_order.h). Faster ISA-specific kernels (issue: fast CPU kernels) must match it.
// Depends on base, gguf (GgmlType) and quant.
#pragma once

#include <cstdint>

#include "base/thread_pool.h"
#include "gguf/ggml_type.h"

namespace ponder {

// A 2-D weight matrix [n_out, n_in] stored row-major in `type` (row = n_in elements).
struct WeightView {
  GgmlType type = GgmlType::F32;
  const void* data = nullptr;
  int64_t n_in = 0;   // row length (ggml ne[0])
  int64_t n_out = 0;  // number of rows (ggml ne[1])
  // The rows interleaved in groups of 16 (kernels/interleave.h), made at load time when this CPU
  // has a kernel for that layout; matmul() then uses it and the x16 float order. `data` stays
  // valid for row lookups.
  const void* x16 = nullptr;
  int64_t row_bytes() const { return ggml_row_bytes(type, n_in); }
  const uint8_t* row(int64_t r) const {
    return static_cast<const uint8_t*>(data) + r * row_bytes();
  }
};

// y[r, o] = sum_i w[o, i] * x[r, i] for r < n_rows.   x: [n_rows, n_in]   y: [n_rows, n_out]
void matmul(const WeightView& w, const float* x, int64_t n_rows, float* y, ThreadPool& pool);

// Several products of the same activations x with weights of the same row length (q, k, v; or
// gate, up): y[k] = x . w[k]^T for each k, in one parallel pass with one synchronisation, and the
// activations rounded once per packing format. Each output equals what matmul() gives, bit for bit.
void matmul_group(const WeightView* const* w, float* const* y, int count, const float* x,
                  int64_t n_rows, ThreadPool& pool);

// Dequantizes row `r` of w into out[n_in] (embedding lookup).
void weight_row(const WeightView& w, int64_t r, float* out);

}  // namespace ponder
