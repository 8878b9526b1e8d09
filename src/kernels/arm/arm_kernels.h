// Entry points of the ARM SIMD matmul kernels. Their translation units get their own target flags
// (src/kernels/CMakeLists.txt) so the library itself runs on any ARMv8-A: nothing here may be
// called unless cpu_features() says the extension is there (kernel_table.cc checks).
// Depends on kernels/kernel_table.h only.
#pragma once

#include "kernels/kernel_table.h"

namespace ponder {

// NEON + dot-product (sdot) kernels for weights in the x16 layout (kernels/interleave.h), bitwise
// equal to the scalar x16 order; nullptr for other types.
const MatmulKernel* neon_x16_matmul_kernel(GgmlType type);

}  // namespace ponder
