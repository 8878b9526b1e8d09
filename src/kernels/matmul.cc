#include "kernels/matmul.h"

#include <cstdint>
#include <vector>

#include "kernels/kernel_table.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

// Scratch for packed activation rows, 64-byte aligned, grown as needed and kept per thread so the
// forward pass does not allocate once warmed up.
uint8_t* packed_scratch(int64_t bytes) {
  thread_local std::vector<uint8_t> buf;
  if (static_cast<int64_t>(buf.size()) < bytes + 64) buf.resize(static_cast<size_t>(bytes + 64));
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + (64 - p % 64) % 64;
}

}  // namespace

void weight_row(const WeightView& w, int64_t r, float* out) {
  dequantize_row(w.type, w.row(r), out, w.n_in);
}

// Each activation row is rounded once to the weight type's companion type (as llama.cpp does), then
// every output is one row dot in llama.cpp's float order (dot_ggml_order.h explains why), computed
// by the kernel of kernel_table.h for this CPU (SIMD kernels give bitwise the scalar results).
void matmul(const WeightView& w, const float* x, int64_t n_rows, float* y, ThreadPool& pool) {
  const MatmulKernel* kernel = active_matmul_kernel(w.type);
  if (kernel == nullptr) {  // weights stored as an activation type (Q8_K...)
    std::vector<float> wf(static_cast<size_t>(w.n_in * w.n_out));
    for (int64_t o = 0; o < w.n_out; ++o) weight_row(w, o, wf.data() + o * w.n_in);
    matmul(WeightView{GgmlType::F32, wf.data(), w.n_in, w.n_out}, x, n_rows, y, pool);
    return;
  }
  const int64_t xp_row_bytes = kernel->packed_row_bytes(w.n_in);
  uint8_t* xp = packed_scratch(n_rows * xp_row_bytes);
  if (n_rows > 1) {
    pool.parallel_for(n_rows, 1, [&](int64_t r_begin, int64_t r_end) {
      for (int64_t r = r_begin; r < r_end; ++r)
        kernel->pack_row(x + r * w.n_in, xp + r * xp_row_bytes, w.n_in);
    });
  } else {
    kernel->pack_row(x, xp, w.n_in);
  }
  // Output rows in multiples of 16 per thread: whole register tiles, and a row's result does not
  // depend on the split (nor on n_rows).
  pool.parallel_for(w.n_out, 16, [&](int64_t o_begin, int64_t o_end) {
    kernel->gemm(w, xp, n_rows, o_begin, o_end, y, w.n_out);
  });
}

}  // namespace ponder
