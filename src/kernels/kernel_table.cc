#include "kernels/kernel_table.h"

#include "kernels/arm/arm_kernels.h"
#include "kernels/dot_ggml_order.h"
#include "kernels/interleave.h"
#include "kernels/x86/x86_kernels.h"

namespace ponder {
namespace {

int64_t round_up_64(int64_t n) { return (n + 63) / 64 * 64; }

// The scalar reference: rows rounded by quantize_activation_row, outputs by the row dot.
template <GgmlType kType>
int64_t scalar_packed_row_bytes(int64_t n_in) {
  return round_up_64(ggml_row_bytes(dot_activation_type(kType), n_in));
}

template <GgmlType kType>
void scalar_pack_row(const float* x, void* dst, int64_t n_in) {
  quantize_activation_row(dot_activation_type(kType), x, dst, n_in);
}

// y[r * y_stride + o] = dot(row o of w, packed row r) over ggml-layout rows.
void gemm_by_row_dots(RowDotFn dot, int64_t x_bytes, const WeightView& w, const void* xp,
                      int64_t n_rows, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  const uint8_t* x = static_cast<const uint8_t*>(xp);
  for (int64_t o = o_begin; o < o_end; ++o) {
    for (int64_t r = 0; r < n_rows; ++r)
      y[r * y_stride + o] = dot(w.row(o), x + r * x_bytes, w.n_in);
  }
}

template <GgmlType kType>
void scalar_gemm(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                 int64_t o_end, float* y, int64_t y_stride) {
  gemm_by_row_dots(row_dot_function(kType), scalar_packed_row_bytes<kType>(w.n_in), w, xp, n_rows,
                   o_begin, o_end, y, y_stride);
}

template <GgmlType kType>
constexpr MatmulKernel scalar_kernel(const char* name) {
  return {kType,
          Isa::kScalar,
          name,
          scalar_packed_row_bytes<kType>,
          scalar_pack_row<kType>,
          scalar_gemm<kType>};
}

constexpr MatmulKernel kScalarKernels[] = {
    scalar_kernel<GgmlType::F32>("f32_scalar"),   scalar_kernel<GgmlType::F16>("f16_scalar"),
    scalar_kernel<GgmlType::BF16>("bf16_scalar"), scalar_kernel<GgmlType::Q4_0>("q4_0_scalar"),
    scalar_kernel<GgmlType::Q4_1>("q4_1_scalar"), scalar_kernel<GgmlType::Q5_0>("q5_0_scalar"),
    scalar_kernel<GgmlType::Q5_1>("q5_1_scalar"), scalar_kernel<GgmlType::Q8_0>("q8_0_scalar"),
    scalar_kernel<GgmlType::Q2_K>("q2_K_scalar"), scalar_kernel<GgmlType::Q3_K>("q3_K_scalar"),
    scalar_kernel<GgmlType::Q4_K>("q4_K_scalar"), scalar_kernel<GgmlType::Q5_K>("q5_K_scalar"),
    scalar_kernel<GgmlType::Q6_K>("q6_K_scalar"),
};

// The x16 order on ggml-layout rows (Q8_K activations), the reference of the x16 SIMD kernels.
template <GgmlType kType, RowDotFn kDot>
void scalar_x16_gemm(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                     int64_t o_end, float* y, int64_t y_stride) {
  gemm_by_row_dots(kDot, scalar_packed_row_bytes<kType>(w.n_in), w, xp, n_rows, o_begin, o_end, y,
                   y_stride);
}

constexpr MatmulKernel kScalarX16Kernels[] = {
    {GgmlType::Q4_K, Isa::kScalar, "q4_K_x16_scalar", scalar_packed_row_bytes<GgmlType::Q4_K>,
     scalar_pack_row<GgmlType::Q4_K>, scalar_x16_gemm<GgmlType::Q4_K, dot_q4_K_x16_order>, true},
    {GgmlType::Q5_K, Isa::kScalar, "q5_K_x16_scalar", scalar_packed_row_bytes<GgmlType::Q5_K>,
     scalar_pack_row<GgmlType::Q5_K>, scalar_x16_gemm<GgmlType::Q5_K, dot_q5_K_x16_order>, true},
    {GgmlType::Q6_K, Isa::kScalar, "q6_K_x16_scalar", scalar_packed_row_bytes<GgmlType::Q6_K>,
     scalar_pack_row<GgmlType::Q6_K>, scalar_x16_gemm<GgmlType::Q6_K, dot_q6_K_x16_order>, true},
    {GgmlType::Q8_0, Isa::kScalar, "q8_0_x16_scalar", scalar_packed_row_bytes<GgmlType::Q8_0>,
     scalar_pack_row<GgmlType::Q8_0>, scalar_x16_gemm<GgmlType::Q8_0, dot_q8_0_x16_order>, true},
};

const MatmulKernel* scalar_matmul_kernel(GgmlType type) {
  for (const MatmulKernel& k : kScalarKernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

}  // namespace

const MatmulKernel* find_matmul_kernel(GgmlType type, Isa isa) {
#if PONDER_X86_KERNELS
  const CpuFeatures& f = cpu_features();
  if (isa == Isa::kAvx512 && isa_supported(Isa::kAvx512) && f.avx512vnni) {
    if (const MatmulKernel* k = avx512_matmul_kernel(type)) return k;
    if (const MatmulKernel* k = avx512_legacy_matmul_kernel(type)) return k;
    if (const MatmulKernel* k = avx512_q2q3_matmul_kernel(type)) return k;
  }
  if (isa == Isa::kAvx512 && isa_supported(Isa::kAvx512) && f.avx512bf16) {
    if (const MatmulKernel* k = avx512bf16_matmul_kernel(type)) return k;
  }
  if (isa == Isa::kAvxVnni && isa_supported(Isa::kAvxVnni)) {
    if (const MatmulKernel* k = avxvnni_legacy_matmul_kernel(type)) return k;
    if (const MatmulKernel* k = avxvnni_q2q3_matmul_kernel(type)) return k;
  }
  if (isa_runs_avx2(isa) && isa_supported(Isa::kAvx2)) {
    if (const MatmulKernel* k = avx2_matmul_kernel(type)) return k;
    if (const MatmulKernel* k = avx2_bf16_matmul_kernel(type)) return k;
    if (const MatmulKernel* k = avx2_legacy_matmul_kernel(type)) return k;
    if (const MatmulKernel* k = avx2_q2q3_matmul_kernel(type)) return k;
  }
#endif
  return scalar_matmul_kernel(type);
}

const MatmulKernel* active_matmul_kernel(GgmlType type) {
  return find_matmul_kernel(type, active_isa());
}

const MatmulKernel* find_x16_matmul_kernel(GgmlType type, Isa isa) {
#if PONDER_X86_KERNELS
  if (isa == Isa::kAvx512 && isa_supported(Isa::kAvx512) && cpu_features().avx512vnni) {
    if (const MatmulKernel* k = avx512_x16_matmul_kernel(type)) return k;
  }
  if (isa == Isa::kAvxVnni && isa_supported(Isa::kAvxVnni)) {
    if (const MatmulKernel* k = avxvnni_x16_matmul_kernel(type)) return k;
  }
  if (isa_runs_avx2(isa) && isa_supported(Isa::kAvx2)) {
    if (const MatmulKernel* k = avx2_x16_matmul_kernel(type)) return k;
  }
#endif
#if PONDER_ARM_KERNELS
  if (isa == Isa::kNeon && isa_supported(Isa::kNeon) && cpu_features().dotprod) {
    if (const MatmulKernel* k = neon_x16_matmul_kernel(type)) return k;
  }
#endif
  for (const MatmulKernel& k : kScalarX16Kernels) {
    if (k.type == type) return &k;
  }
  return nullptr;
}

bool x16_kernel_available(GgmlType type) {
  const MatmulKernel* k = find_x16_matmul_kernel(type, active_isa());
  return k != nullptr && k->isa != Isa::kScalar;
}

}  // namespace ponder
