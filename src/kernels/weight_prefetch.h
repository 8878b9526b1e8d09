// Whether the x16 decode kernels (one activation row, x86/matmul_x16_*.cc) prefetch the weight
// stream in software. Which is faster depends on the machine, not the ISA: on one Zen 4 host
// (session 11, ~27 GB/s) prefetching into L2 made decode 25% faster than into L1, while on another
// Zen 4 host (session 20, ~47 GB/s) no software prefetch at all was 30-45% faster than either, with
// AVX2 and AVX-512 kernels alike. So the model measures both on its own weights at load
// (model/prefetch_calibration.h) and sets the switch; PONDER_PREFETCH=0|1 forces it. One switch for
// the process, read once per kernel call; on (the old behaviour) until set.
// Depends on nothing.
#pragma once

#include <optional>

namespace ponder {

bool weight_prefetch();
void set_weight_prefetch(bool on);

// PONDER_PREFETCH=0 or 1 from the environment, or nothing.
std::optional<bool> weight_prefetch_from_env();

}  // namespace ponder
