#include "cpu/cpu_features.h"

#include <fmt/core.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include "base/log.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
#include <sys/auxv.h>
#endif

namespace ponder {
namespace {

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.vendor = vendor;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    f.fma = c & (1u << 12);
    f.f16c = c & (1u << 29);
    const bool osxsave = c & (1u << 27);
    unsigned long long xcr0 = 0;
    if (osxsave) {
      unsigned lo, hi;
      __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
      xcr0 = (static_cast<unsigned long long>(hi) << 32) | lo;
    }
    const bool ymm = (xcr0 & 0x6) == 0x6;
    const bool zmm = (xcr0 & 0xe6) == 0xe6;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
      f.avx2 = ymm && (b & (1u << 5));
      f.avx512f = zmm && (b & (1u << 16));
      f.avx512dq = zmm && (b & (1u << 17));
      f.avx512bw = zmm && (b & (1u << 30));
      f.avx512vl = zmm && (b & (1u << 31));
      f.avx512vnni = zmm && (c & (1u << 11));
    }
    if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) {
      f.avxvnni = ymm && (a & (1u << 4));
      f.avx512bf16 = zmm && (a & (1u << 5));
    }
    f.fma = f.fma && ymm;
    f.f16c = f.f16c && ymm;
  }
  unsigned regs[12] = {};
  if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &regs[4 * i], &regs[4 * i + 1], &regs[4 * i + 2],
                  &regs[4 * i + 3]);
    }
    char brand[49] = {};
    std::memcpy(brand, regs, 48);
    std::string_view b(brand);
    const size_t first = b.find_first_not_of(' ');
    const size_t last = b.find_last_not_of(' ');
    if (first != std::string_view::npos) f.brand = std::string(b.substr(first, last - first + 1));
  }
#elif defined(__aarch64__)
  f.neon = true;
#if defined(__linux__)
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
#ifdef HWCAP_ASIMDDP
  f.dotprod = hw & HWCAP_ASIMDDP;
#endif
#ifdef HWCAP2_I8MM
  f.i8mm = hw2 & HWCAP2_I8MM;
#endif
  (void)hw;
  (void)hw2;
#endif
#endif
  return f;
}

}  // namespace

std::string CpuFeatures::summary() const {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s.push_back(' ');
    s.append(name);
  };
  add(avx2, "AVX2");
  add(fma, "FMA");
  add(f16c, "F16C");
  add(avxvnni, "AVX-VNNI");
  add(avx512f, "AVX512F");
  add(avx512bw, "AVX512BW");
  add(avx512vl, "AVX512VL");
  add(avx512vnni, "AVX512-VNNI");
  add(avx512bf16, "AVX512-BF16");
  add(neon, "NEON");
  add(dotprod, "DOTPROD");
  add(i8mm, "I8MM");
  return s.empty() ? "(no SIMD extensions)" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvxVnni:
      return "avxvnni";
    case Isa::kAvx512:
      return "avx512";
    case Isa::kNeon:
      return "neon";
  }
  return "?";
}

bool isa_supported(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::kScalar:
      return true;
    case Isa::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case Isa::kAvxVnni:
      return f.avxvnni && isa_supported(Isa::kAvx2);
    case Isa::kAvx512:
      return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && isa_supported(Isa::kAvx2);
    case Isa::kNeon:
      return f.neon;
  }
  return false;
}

Isa best_isa() {
  for (Isa isa : {Isa::kAvx512, Isa::kAvxVnni, Isa::kAvx2, Isa::kNeon}) {
    if (isa_supported(isa)) return isa;
  }
  return Isa::kScalar;
}

bool isa_runs_avx2(Isa isa) {
  return isa == Isa::kAvx2 || isa == Isa::kAvxVnni || isa == Isa::kAvx512;
}

Isa active_isa() {
  static const Isa chosen = [] {
    const char* env = std::getenv("PONDER_ISA");
    if (env == nullptr || *env == '\0') return best_isa();
    for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512, Isa::kNeon}) {
      if (std::strcmp(env, isa_name(isa)) == 0) {
        if (isa_supported(isa)) return isa;
        log_warn("PONDER_ISA={} is not supported by this CPU; using {}", env, isa_name(best_isa()));
        return best_isa();
      }
    }
    log_warn("PONDER_ISA={} is unknown (scalar, avx2, avxvnni, avx512, neon); using {}", env,
             isa_name(best_isa()));
    return best_isa();
  }();
  return chosen;
}

}  // namespace ponder
