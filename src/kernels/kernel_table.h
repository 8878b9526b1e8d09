// The matrix-product kernels chosen at run time per (weight type, ISA). Each kernel owns the
// layout of its activations: pack_row rounds one f32 row with exactly the reference quantizer
// (quantize_activation_row of dot_ggml_order.h) and lays the int8 values out as its inner loop
// wants them (plus per-block sums it can precompute once per row); gemm then computes outputs whose
// float operations are, output by output, the reference row dot's (dot_ggml_order.cc) in the same
// order, so every variant is bitwise equal to the scalar reference and a row's result does not
// depend on how many other rows share the call (batch invariance). The scalar entry is the
// reference itself and the fallback for every type without a SIMD kernel. Depends on base, cpu,
// gguf and quant (via kernels/matmul.h and kernels/dot_ggml_order.h).
#pragma once

#include <cstdint>

#include "cpu/cpu_features.h"
#include "gguf/ggml_type.h"
#include "kernels/matmul.h"

namespace ponder {

struct MatmulKernel {
  GgmlType type;
  Isa isa;
  const char* name;  // "q4_K_avx512"
  // Bytes one packed activation row of n_in elements takes (a multiple of 64).
  int64_t (*packed_row_bytes)(int64_t n_in);
  // Quantizes x[n_in] into dst (packed_row_bytes(n_in) bytes, 64-byte aligned).
  void (*pack_row)(const float* x, void* dst, int64_t n_in);
  // y[r * y_stride + o] = dot(w row o, x row r) for o in [o_begin, o_end) and r < n_rows, where
  // xp holds n_rows packed rows back to back.
  void (*gemm)(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin, int64_t o_end,
               float* y, int64_t y_stride);
  // True for the kernels of the x16 layouts (kernels/interleave.h; the x16 order, or for Q5_K
  // llama.cpp's order on that layout). Their SIMD gemm reads w.x16 and
  // needs o_begin and o_end to be multiples of 16; the scalar one reads the ggml rows.
  bool x16 = false;
};

// The best kernel for weights of `type` at most `isa` can run (AVX-512 kernels also need VNNI,
// the BF16 one AVX512_BF16, else the AVX2 one is used); the scalar reference if there is no SIMD
// one; nullptr if the type has no row dot at all (weights stored in an activation type such as
// Q8_K).
const MatmulKernel* find_matmul_kernel(GgmlType type, Isa isa);

// The same for the ISA the process runs with (active_isa(), PONDER_ISA).
const MatmulKernel* active_matmul_kernel(GgmlType type);

// The x16-order kernel for `type` at most `isa` can run: the SIMD one that reads the x16 layout
// (AVX-512 VNNI, else AVX-VNNI, else AVX2; all bitwise equal), or (with no such SIMD kernel) the
// scalar one; nullptr if the type has no x16 layout.
const MatmulKernel* find_x16_matmul_kernel(GgmlType type, Isa isa);

// Whether this CPU (active_isa()) has a SIMD kernel for weights of `type` in the x16 layout: only
// then is it worth making the x16 copy at load time.
bool x16_kernel_available(GgmlType type);

}  // namespace ponder
