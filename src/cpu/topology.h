// CpuTopology: the machine's logical CPUs, physical cores (SMT siblings counted once; on hybrid
// CPUs only performance cores) and NUMA nodes, read from Linux sysfs, with the affinity mask this
// process may use. default_threads() is the number of physical cores we may run on.
// Depends on base.
#pragma once

#include <string>
#include <vector>

namespace ponder {

struct CpuTopology {
  int n_logical = 0;      // CPUs this process may run on
  int n_physical = 0;     // distinct (package, core) pairs among them
  int n_performance = 0;  // physical performance cores (== n_physical on non-hybrid CPUs)
  int n_numa_nodes = 1;
  std::vector<int> numa_node_ids;     // the memory nodes' numbers (empty when sysfs has none)
  std::vector<int> one_cpu_per_core;  // a logical CPU per physical (performance) core, for pinning

  int default_threads() const;
  std::string summary() const;
};

const CpuTopology& cpu_topology();

}  // namespace ponder
