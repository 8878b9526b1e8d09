#include <gtest/gtest.h>
#include <linux/mempolicy.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "cpu/cpu_features.h"
#include "cpu/numa_memory.h"
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
  EXPECT_EQ(f.avxvnni, has("avx_vnni"));
  EXPECT_TRUE(isa_supported(Isa::kScalar));
  EXPECT_TRUE(isa_supported(best_isa()));
  // The AVX-VNNI level: AVX-VNNI on top of the AVX2 level; chosen only where AVX-512 is not.
  EXPECT_EQ(isa_supported(Isa::kAvxVnni), f.avxvnni && isa_supported(Isa::kAvx2));
  if (isa_supported(Isa::kAvxVnni) && !isa_supported(Isa::kAvx512)) {
    EXPECT_EQ(best_isa(), Isa::kAvxVnni);
  }
  for (Isa isa : {Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512}) EXPECT_TRUE(isa_runs_avx2(isa));
  for (Isa isa : {Isa::kScalar, Isa::kNeon}) EXPECT_FALSE(isa_runs_avx2(isa));
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

// Interleaving a fresh region over this machine's nodes takes effect (the kernel reports the
// policy for its pages), the memory stays usable, and a node that does not exist is refused.
TEST(NumaMemoryTest, InterleavesFreshPagesOverTheNodes) {
  const CpuTopology& t = cpu_topology();
  if (t.numa_node_ids.empty()) GTEST_SKIP() << "no /sys/devices/system/node";
  EXPECT_EQ(static_cast<int>(t.numa_node_ids.size()), t.n_numa_nodes);
  constexpr size_t kBytes = size_t{4} << 20;
  void* p = std::aligned_alloc(size_t{2} << 20, kBytes);
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(interleave_pages(p, kBytes, t.numa_node_ids));
  std::memset(p, 1, kBytes);
  EXPECT_EQ(page_memory_policy(static_cast<char*>(p) + kBytes / 2), MPOL_INTERLEAVE);
  EXPECT_EQ(static_cast<unsigned char*>(p)[kBytes - 1], 1);
  void* q = std::aligned_alloc(size_t{2} << 20, kBytes);
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(interleave_pages(q, kBytes, {1000}));
  EXPECT_FALSE(interleave_pages(q, kBytes, {}));
  EXPECT_NE(page_memory_policy(q), MPOL_INTERLEAVE);
  std::free(p);
  std::free(q);
}

}  // namespace
}  // namespace ponder
