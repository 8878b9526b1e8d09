// Entry points of the x86 SIMD matmul kernels, one translation unit per ISA, each compiled with its
// own target flags (src/kernels/CMakeLists.txt) so the library runs on any x86-64: nothing here may
// be called unless cpu_features() says the ISA is there (kernel_table.cc checks).
// Depends on kernels/kernel_table.h only.
#pragma once

#include "kernels/kernel_table.h"

namespace ponder {

// AVX2 + FMA + F16C kernels for `type`, or nullptr.
const MatmulKernel* avx2_matmul_kernel(GgmlType type);
// AVX-512 F/BW/VL/DQ + VNNI kernels for `type`, or nullptr.
const MatmulKernel* avx512_matmul_kernel(GgmlType type);
// AVX-512 BF16 kernel (vdpbf16ps) for BF16 weights, or nullptr (x86/matmul_bf16_avx512.cc).
const MatmulKernel* avx512bf16_matmul_kernel(GgmlType type);
// AVX2 + FMA kernel for BF16 weights with vdpbf16ps emulated bit for bit, or nullptr
// (x86/matmul_bf16_avx2.cc).
const MatmulKernel* avx2_bf16_matmul_kernel(GgmlType type);
// AVX2 + FMA + F16C kernels for Q4_0, Q4_1, Q5_0 and Q5_1 weights, or nullptr
// (x86/matmul_legacy_avx2.cc).
const MatmulKernel* avx2_legacy_matmul_kernel(GgmlType type);
// The same with AVX-VNNI's 256-bit vpdpbusd for the integer sums (bitwise equal), or nullptr
// (x86/matmul_legacy_avxvnni.cc).
const MatmulKernel* avxvnni_legacy_matmul_kernel(GgmlType type);
// AVX-512 F/BW/VL/DQ + VNNI kernels for Q4_0, Q4_1, Q5_0 and Q5_1 weights, or nullptr
// (x86/matmul_legacy_avx512.cc).
const MatmulKernel* avx512_legacy_matmul_kernel(GgmlType type);
// AVX2 + FMA + F16C kernels for Q2_K and Q3_K weights, or nullptr (x86/matmul_q2q3_avx2.cc).
const MatmulKernel* avx2_q2q3_matmul_kernel(GgmlType type);
// The same with AVX-VNNI's 256-bit vpdpwssd (bitwise equal), or nullptr
// (x86/matmul_q2q3_avxvnni.cc).
const MatmulKernel* avxvnni_q2q3_matmul_kernel(GgmlType type);
// AVX-512 F/BW/VL/DQ + VNNI kernels for Q2_K and Q3_K weights, or nullptr
// (x86/matmul_q2q3_avx512.cc).
const MatmulKernel* avx512_q2q3_matmul_kernel(GgmlType type);
// AVX-512 VNNI kernels for weights in the x16 layout (kernels/interleave.h), or nullptr.
const MatmulKernel* avx512_x16_matmul_kernel(GgmlType type);
// AVX2 + FMA + F16C kernels for weights in the x16 layout, bitwise equal to the AVX-512 ones.
const MatmulKernel* avx2_x16_matmul_kernel(GgmlType type);
// The same with AVX-VNNI's 256-bit vpdpbusd / vpdpwssd for the integer sums (bitwise equal).
const MatmulKernel* avxvnni_x16_matmul_kernel(GgmlType type);

}  // namespace ponder
