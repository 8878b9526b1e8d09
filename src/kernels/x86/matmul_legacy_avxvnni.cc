// AVX-VNNI matmul kernels for Q4_0, Q4_1, Q5_0 and Q5_1: x86/legacy_ymm_kernels.h with the
// integer sums from the 256-bit vpdpbusd. Compiled with -mavxvnni -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvxVnni;  // of every kernel in this file

#include "kernels/x86/legacy_ymm_kernels.h"

}  // namespace

const MatmulKernel* avxvnni_legacy_matmul_kernel(GgmlType type) {
  return find_kernel(kKernels, type);
}

}  // namespace ponder
