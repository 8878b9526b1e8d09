// Entry points of the x86 SIMD matmul kernels, one translation unit per ISA, each compiled with its
// own target flags (src/kernels/CMakeLists.txt) so the library runs on any x86-64: nothing here may
// be called unless cpu_features() says the ISA is there (kernel_table.cc checks).
// Depends on kernels/kernel_table.h only.
#pragma once

#include "kernels/kernel_table.h"

namespace ponder {

// Each returns its file's kernel for `type`, or nullptr for a type it does not take; every kernel
// is bitwise the scalar reference of its order (kernel_table.h).
// AVX2 + FMA + F16C (x86/matmul_*_avx2.cc):
const MatmulKernel* avx2_matmul_kernel(GgmlType type);         // K-quants, Q8_0, F16 on ggml rows
const MatmulKernel* avx2_bf16_matmul_kernel(GgmlType type);    // BF16, vdpbf16ps emulated exactly
const MatmulKernel* avx2_legacy_matmul_kernel(GgmlType type);  // Q4_0, Q4_1, Q5_0, Q5_1
const MatmulKernel* avx2_q2q3_matmul_kernel(GgmlType type);    // Q2_K, Q3_K
const MatmulKernel* avx2_x16_matmul_kernel(GgmlType type);     // x16 layouts (interleave.h)
// The AVX-VNNI level: matmul_legacy_avx2.cc, matmul_q2q3_avx2.cc and matmul_x16_avx2.cc compiled
// again with -mavxvnni (x86/ymm_level.h), bitwise the AVX2 kernels.
const MatmulKernel* avxvnni_legacy_matmul_kernel(GgmlType type);
const MatmulKernel* avxvnni_q2q3_matmul_kernel(GgmlType type);
const MatmulKernel* avxvnni_x16_matmul_kernel(GgmlType type);
// AVX-512 F/BW/VL/DQ with VNNI (x86/matmul_*_avx512.cc), and with BF16 (vdpbf16ps) for BF16:
const MatmulKernel* avx512_matmul_kernel(GgmlType type);
const MatmulKernel* avx512_legacy_matmul_kernel(GgmlType type);
const MatmulKernel* avx512_q2q3_matmul_kernel(GgmlType type);
const MatmulKernel* avx512_x16_matmul_kernel(GgmlType type);
const MatmulKernel* avx512bf16_matmul_kernel(GgmlType type);

}  // namespace ponder
