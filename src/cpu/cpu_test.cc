#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <thread>

#include "cpu/cpu_features.h"
#include "cpu/topology.h"

namespace ponder {
namespace {

// The detected features agree with what the kernel reports in /proc/cpuinfo.
TEST(CpuFeaturesTest, AgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags = line.substr(line.find(':') + 1);
      flags.push_back(' ');
      break;
    }
  }
  if (flags.empty()) GTEST_SKIP() << "no x86 flags line in /proc/cpuinfo";
  const CpuFeatures& f = cpu_features();
  auto has = [&](const char* name) {
    std::string word(" ");
    word.append(name);
    word.push_back(' ');
    return flags.find(word) != std::string::npos;
  };
  EXPECT_EQ(f.avx2, has("avx2"));
  EXPECT_EQ(f.fma, has("fma"));
  EXPECT_EQ(f.f16c, has("f16c"));
  EXPECT_EQ(f.avx512f, has("avx512f"));
  EXPECT_EQ(f.avx512bw, has("avx512bw"));
  EXPECT_EQ(f.avx512vl, has("avx512vl"));
  EXPECT_EQ(f.avx512vnni, has("avx512_vnni"));
  EXPECT_EQ(f.avx512bf16, has("avx512_bf16"));
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(best_isa()));
}

TEST(TopologyTest, CountsAreConsistent) {
  const CpuTopology& t = cpu_topology();
  EXPECT_GE(t.n_logical, 1);
  EXPECT_GE(t.n_physical, 1);
  EXPECT_LE(t.n_physical, t.n_logical);
  EXPECT_LE(t.n_performance, t.n_physical);
  EXPECT_EQ(static_cast<int>(t.one_cpu_per_core.size()), t.n_performance);
  EXPECT_GE(t.default_threads(), 1);
  EXPECT_LE(t.default_threads(), static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace
}  // namespace ponder
