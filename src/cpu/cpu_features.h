// CpuFeatures: what the processor can do, detected once at start (cpuid on x86, hwcaps on ARM),
// and the kernel ISA chosen from it. PONDER_ISA=scalar|avx2|avx512|neon forces a choice (a forced
// ISA the CPU lacks is refused, falling back to the best supported one with a warning).
// Depends on base.
#pragma once

#include <string>

namespace ponder {

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false, avx512bf16 = false, avxvnni = false;
  bool neon = false, dotprod = false, i8mm = false;
  std::string brand;

  std::string summary() const;  // "AVX2 FMA F16C AVX512F/BW/VL VNNI BF16"
};

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3 };

const CpuFeatures& cpu_features();
const char* isa_name(Isa isa);
bool isa_supported(Isa isa);
Isa best_isa();
// The ISA kernels use: PONDER_ISA if set and supported, else best_isa().
Isa active_isa();

}  // namespace ponder
