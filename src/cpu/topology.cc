#include "cpu/topology.h"

#include <fmt/core.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

namespace ponder {
namespace {

bool read_int(const std::string& path, int* out) {
  std::ifstream in(path);
  return static_cast<bool>(in >> *out);
}

// Parses a sysfs CPU list such as "0-3,8,10-11".
std::set<int> parse_cpu_list(const std::string& path) {
  std::set<int> cpus;
  std::ifstream in(path);
  std::string text;
  if (!std::getline(in, text)) return cpus;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(pos, comma - pos);
    const size_t dash = part.find('-');
    try {
      if (dash == std::string::npos) {
        cpus.insert(std::stoi(part));
      } else {
        for (int c = std::stoi(part.substr(0, dash)); c <= std::stoi(part.substr(dash + 1)); ++c)
          cpus.insert(c);
      }
    } catch (...) {
    }
    pos = comma + 1;
  }
  return cpus;
}

CpuTopology detect() {
  CpuTopology t;
  cpu_set_t mask;
  CPU_ZERO(&mask);
  std::vector<int> allowed;
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mask)) allowed.push_back(c);
    }
  }
  if (allowed.empty()) {
    for (unsigned c = 0; c < std::max(1u, std::thread::hardware_concurrency()); ++c)
      allowed.push_back(static_cast<int>(c));
  }
  t.n_logical = static_cast<int>(allowed.size());
  // Hybrid Intel CPUs list their performance cores here; elsewhere the file is absent.
  const std::set<int> p_cores = parse_cpu_list("/sys/devices/cpu_core/cpus");
  std::set<std::pair<int, int>> cores, perf_cores;
  for (int c : allowed) {
    const std::string base = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", c);
    int core = c, package = 0;
    read_int(base + "core_id", &core);
    read_int(base + "physical_package_id", &package);
    const bool is_new = cores.insert({package, core}).second;
    if (p_cores.empty() || p_cores.count(c)) {
      if (perf_cores.insert({package, core}).second) t.one_cpu_per_core.push_back(c);
    }
    (void)is_new;
  }
  t.n_physical = static_cast<int>(cores.size());
  t.n_performance = static_cast<int>(perf_cores.size());
  int nodes = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/sys/devices/system/node", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("node", 0) == 0 && name.size() > 4 &&
        std::isdigit(static_cast<unsigned char>(name[4]))) {
      ++nodes;
      t.numa_node_ids.push_back(std::atoi(name.c_str() + 4));
    }
  }
  t.n_numa_nodes = std::max(1, nodes);
  return t;
}

}  // namespace

int CpuTopology::default_threads() const {
  return std::max(1, n_performance > 0 ? n_performance : (n_physical > 0 ? n_physical : n_logical));
}

std::string CpuTopology::summary() const {
  return fmt::format("{} logical CPUs, {} physical cores ({} performance), {} NUMA node{}",
                     n_logical, n_physical, n_performance, n_numa_nodes,
                     n_numa_nodes == 1 ? "" : "s");
}

const CpuTopology& cpu_topology() {
  static const CpuTopology t = detect();
  return t;
}

}  // namespace ponder
