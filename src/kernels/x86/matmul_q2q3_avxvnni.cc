// AVX-VNNI matmul kernels for Q2_K and Q3_K: x86/q2q3_ymm_kernels.h with the chunks' scales
// applied by the 256-bit vpdpwssd. Compiled with -mavxvnni -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvxVnni;  // of every kernel in this file

#include "kernels/x86/q2q3_ymm_kernels.h"

}  // namespace

const MatmulKernel* avxvnni_q2q3_matmul_kernel(GgmlType type) {
  return find_kernel(kKernels, type);
}

}  // namespace ponder
