// AVX2 + FMA + F16C matmul kernels for Q2_K and Q3_K: x86/q2q3_ymm_kernels.h with the integer
// sums from vpmaddubsw / vpmaddwd. Compiled with -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvx2;  // of every kernel in this file

#include "kernels/x86/q2q3_ymm_kernels.h"

}  // namespace

const MatmulKernel* avx2_q2q3_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
