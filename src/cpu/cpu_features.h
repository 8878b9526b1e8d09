// CpuFeatures: what the processor can do, detected once at start (cpuid on x86, hwcaps on ARM),
// and the kernel ISA chosen from it. PONDER_ISA=scalar|avx2|avxvnni|avx512|neon forces a choice (a
// forced ISA the CPU lacks is refused, falling back to the best supported one with a warning).
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
  std::string vendor;  // cpuid leaf 0 on x86: "AuthenticAMD", "GenuineIntel", ...

  std::string summary() const;  // "AVX2 FMA F16C AVX512F/BW/VL VNNI BF16"
};

// kAvxVnni: AVX2 + FMA + F16C with AVX-VNNI (VEX vpdpbusd on 256-bit registers: Intel Alder Lake
// and later, AMD Zen 5), the level between AVX2 and AVX-512. The AVX-VNNI and AVX-512 levels run
// the AVX2 kernels wherever they have none of their own.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kNeon = 3, kAvxVnni = 4 };

const CpuFeatures& cpu_features();
const char* isa_name(Isa isa);
bool isa_supported(Isa isa);
Isa best_isa();
// Whether the AVX2 kernels run at `isa` (AVX2 and the levels above it).
bool isa_runs_avx2(Isa isa);
// The ISA kernels use: PONDER_ISA if set and supported, else best_isa().
Isa active_isa();

}  // namespace ponder
