// AVX-VNNI kernels for weights in the x16 layouts: x86/x16_ymm_kernels.h with the integer sums from
// the 256-bit vpdpbusd / vpdpwssd. Compiled with -mavxvnni -mavx2 -mfma -mf16c.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/interleave.h"
#include "kernels/weight_prefetch.h"
#include "kernels/x86/x86_kernels.h"
#include "quant/blocks.h"

namespace ponder {
namespace {

constexpr Isa kIsa = Isa::kAvxVnni;  // of every kernel in this file

#include "kernels/x86/x16_ymm_kernels.h"

}  // namespace

const MatmulKernel* avxvnni_x16_matmul_kernel(GgmlType type) { return find_kernel(kKernels, type); }

}  // namespace ponder
