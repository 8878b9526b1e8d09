#include "kernels/weight_prefetch.h"

#include <atomic>
#include <cstdlib>
#include <string_view>

namespace ponder {
namespace {

std::atomic<bool> g_prefetch{true};

}  // namespace

bool weight_prefetch() { return g_prefetch.load(std::memory_order_relaxed); }

void set_weight_prefetch(bool on) { g_prefetch.store(on, std::memory_order_relaxed); }

std::optional<bool> weight_prefetch_from_env() {
  const char* env = std::getenv("PONDER_PREFETCH");
  if (env == nullptr) return std::nullopt;
  const std::string_view v(env);
  if (v == "0") return false;
  if (v == "1") return true;
  return std::nullopt;
}

}  // namespace ponder
