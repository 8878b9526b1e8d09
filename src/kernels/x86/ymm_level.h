// The ISA level of a 256-bit integer kernel file that src/kernels/CMakeLists.txt compiles twice:
// AVX2 + FMA + F16C, and with -mavxvnni and PONDER_AVXVNNI=1 the AVX-VNNI level, whose vpdpbusd /
// vpdpwssd make the same exact integer sums in fewer instructions. Included inside the anonymous
// namespace of x86/matmul_x16_avx2.cc, matmul_legacy_avx2.cc and matmul_q2q3_avx2.cc; their entry
// point is PONDER_YMM_ENTRY(family): avx2_family_matmul_kernel or avxvnni_family_matmul_kernel.
#pragma once

#if PONDER_AVXVNNI
constexpr Isa kIsa = Isa::kAvxVnni;  // of every kernel in the object
#define PONDER_YMM_ENTRY(family) avxvnni_##family##_matmul_kernel
#else
constexpr Isa kIsa = Isa::kAvx2;
#define PONDER_YMM_ENTRY(family) avx2_##family##_matmul_kernel
#endif

// Whether the integer sums use AVX-VNNI (its intrinsics stand in templates' `if constexpr (kVnni)`
// branches, instantiated only in the AVX-VNNI object).
constexpr bool kVnni = kIsa == Isa::kAvxVnni;
