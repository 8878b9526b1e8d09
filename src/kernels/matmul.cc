#include "kernels/matmul.h"

#include <vector>

#include "kernels/dot_ggml_order.h"
#include "quant/quantize.h"

namespace ponder {

void weight_row(const WeightView& w, int64_t r, float* out) {
  dequantize_row(w.type, w.row(r), out, w.n_in);
}

// Each activation row is rounded once to the weight type's companion type (as llama.cpp does), then
// every output is one row dot in llama.cpp's float order (dot_ggml_order.h explains why).
void matmul(const WeightView& w, const float* x, int64_t n_rows, float* y, ThreadPool& pool) {
  if (row_dot_function(w.type) == nullptr) {  // weights stored as an activation type (Q8_K...)
    std::vector<float> wf(static_cast<size_t>(w.n_in * w.n_out));
    for (int64_t o = 0; o < w.n_out; ++o) weight_row(w, o, wf.data() + o * w.n_in);
    matmul(WeightView{GgmlType::F32, wf.data(), w.n_in, w.n_out}, x, n_rows, y, pool);
    return;
  }
  const GgmlType at = dot_activation_type(w.type);
  const RowDotFn dot = row_dot_function(w.type);
  const int64_t xq_row_bytes = ggml_row_bytes(at, w.n_in);
  std::vector<uint8_t> xq(static_cast<size_t>(n_rows * xq_row_bytes));
  for (int64_t r = 0; r < n_rows; ++r) {
    quantize_activation_row(at, x + r * w.n_in, xq.data() + r * xq_row_bytes, w.n_in);
  }
  pool.parallel_for(w.n_out, 16, [&](int64_t o_begin, int64_t o_end) {
    for (int64_t o = o_begin; o < o_end; ++o) {
      const uint8_t* wr = w.row(o);
      for (int64_t r = 0; r < n_rows; ++r) {
        y[r * w.n_out + o] = dot(wr, xq.data() + r * xq_row_bytes, w.n_in);
      }
    }
  });
}

}  // namespace ponder
