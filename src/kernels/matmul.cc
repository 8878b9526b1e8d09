#include "kernels/matmul.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/kernel_table.h"
#include "quant/quantize.h"

namespace ponder {
namespace {

// Scratch for packed activation rows, 64-byte aligned, grown as needed and kept per thread so the
// forward pass does not allocate once warmed up. `slot` tells apart buffers used at the same time.
uint8_t* packed_scratch(int64_t bytes, int slot = 0) {
  thread_local std::vector<uint8_t> bufs[4];
  std::vector<uint8_t>& buf = bufs[slot];
  if (static_cast<int64_t>(buf.size()) < bytes + 64) buf.resize(static_cast<size_t>(bytes + 64));
  const uintptr_t p = reinterpret_cast<uintptr_t>(buf.data());
  return buf.data() + (64 - p % 64) % 64;
}

// Packs n_rows activation rows into xp (rows in parallel when there are several).
void pack_rows(const MatmulKernel& kernel, const float* x, int64_t n_rows, int64_t n_in,
               uint8_t* xp, ThreadPool& pool) {
  const int64_t row_bytes = kernel.packed_row_bytes(n_in);
  if (n_rows == 1) {
    kernel.pack_row(x, xp, n_in);
    return;
  }
  pool.parallel_for(n_rows, 1, [&](int64_t r_begin, int64_t r_end) {
    for (int64_t r = r_begin; r < r_end; ++r)
      kernel.pack_row(x + r * n_in, xp + r * row_bytes, n_in);
  });
}

// The x16 kernel when w has its x16 copy, else the kernel for its ggml layout.
const MatmulKernel* kernel_for(const WeightView& w) {
  if (w.x16 != nullptr) return find_x16_matmul_kernel(w.type, active_isa());
  return active_matmul_kernel(w.type);
}

// The kernel's gemm over at most kRowChunk activation rows at a time: each group of weight rows
// the kernel holds in L1/L2 then meets the packed rows of one chunk (128 x 1.1 bytes a weight
// column: 0.2-2 MB), which stay in L2 or near it, instead of every row of a long prompt (up to
// 7 MB for the 14B's down projection at 512 rows), which went to an L3 this VM shares with other
// tenants; the weights are read once a chunk instead (4 times for 512 rows, a few % of the
// memory traffic a prompt's compute leaves free). pp512 on Zen 5 (2 threads, alternated runs):
// 1.5B 300.5/307.1 -> 314.1/329.4 t/s, 7B 66.6/63.0 -> 71.3/75.3, 14B 25.8/34.2 -> 35.3/36.2
// (64 rows a chunk: 7B 70.1/68.2; 256: 14B 35.3/34.9). Which rows go together never changes an
// output's operations (kernel_table.h), so the bits are the same.
constexpr int64_t kRowChunk = 128;

void gemm_rows(const MatmulKernel& kernel, const WeightView& w, const uint8_t* xp, int64_t n_rows,
               int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  const int64_t row_bytes = kernel.packed_row_bytes(w.n_in);
  for (int64_t r = 0; r < n_rows; r += kRowChunk) {
    kernel.gemm(w, xp + r * row_bytes, std::min(kRowChunk, n_rows - r), o_begin, o_end,
                y + r * y_stride, y_stride);
  }
}

}  // namespace

void weight_row(const WeightView& w, int64_t r, float* out) {
  dequantize_row(w.type, w.row(r), out, w.n_in);
}

// Each activation row is rounded once to the weight type's companion type (as llama.cpp does), then
// every output is one row dot in llama.cpp's float order (dot_ggml_order.h explains why), computed
// by the kernel of kernel_table.h for this CPU (SIMD kernels give bitwise the scalar results).
void matmul(const WeightView& w, const float* x, int64_t n_rows, float* y, ThreadPool& pool) {
  const MatmulKernel* kernel = kernel_for(w);
  if (kernel == nullptr) {  // weights stored as an activation type (Q8_K...)
    std::vector<float> wf(static_cast<size_t>(w.n_in * w.n_out));
    for (int64_t o = 0; o < w.n_out; ++o) weight_row(w, o, wf.data() + o * w.n_in);
    matmul(WeightView{GgmlType::F32, wf.data(), w.n_in, w.n_out}, x, n_rows, y, pool);
    return;
  }
  uint8_t* xp = packed_scratch(n_rows * kernel->packed_row_bytes(w.n_in));
  pack_rows(*kernel, x, n_rows, w.n_in, xp, pool);
  // Output rows in multiples of 16 per thread: whole register tiles, and a row's result does not
  // depend on the split (nor on n_rows).
  pool.parallel_for(w.n_out, 16, [&](int64_t o_begin, int64_t o_end) {
    gemm_rows(*kernel, w, xp, n_rows, o_begin, o_end, y, w.n_out);
  });
}

void matmul_group(const WeightView* const* w, float* const* y, int count, const float* x,
                  int64_t n_rows, ThreadPool& pool) {
  constexpr int kMax = 4;
  const MatmulKernel* kernels[kMax];
  const uint8_t* packed[kMax];
  bool ok = count <= kMax;
  for (int k = 0; ok && k < count; ++k) {
    kernels[k] = kernel_for(*w[k]);
    ok = kernels[k] != nullptr && w[k]->n_in == w[0]->n_in && w[k]->n_out % 16 == 0;
  }
  if (!ok) {  // unusual shapes or types: one product at a time
    for (int k = 0; k < count; ++k) matmul(*w[k], x, n_rows, y[k], pool);
    return;
  }
  // Pack once per distinct packing format (Q4_K and Q6_K weights share their Q8_K rows).
  int n_slots = 0;
  for (int k = 0; k < count; ++k) {
    packed[k] = nullptr;
    for (int j = 0; j < k; ++j) {
      if (kernels[j]->pack_row == kernels[k]->pack_row) packed[k] = packed[j];
    }
    if (packed[k] != nullptr) continue;
    uint8_t* xp = packed_scratch(n_rows * kernels[k]->packed_row_bytes(w[k]->n_in), n_slots++);
    pack_rows(*kernels[k], x, n_rows, w[k]->n_in, xp, pool);
    packed[k] = xp;
  }
  // One pass over the concatenated output rows, split in multiples of 16 as matmul() does.
  int64_t total = 0;
  for (int k = 0; k < count; ++k) total += w[k]->n_out;
  pool.parallel_for(total, 16, [&](int64_t begin, int64_t end) {
    int64_t base = 0;
    for (int k = 0; k < count; ++k) {
      const int64_t b = std::max(begin, base), e = std::min(end, base + w[k]->n_out);
      if (b < e)
        gemm_rows(*kernels[k], *w[k], packed[k], n_rows, b - base, e - base, y[k], w[k]->n_out);
      base += w[k]->n_out;
    }
  });
}

}  // namespace ponder
