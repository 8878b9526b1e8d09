#include "base/log.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace ponder {
namespace {

LogLevel initial_level() {
  const char* env = std::getenv("PONDER_LOG");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  if (std::strcmp(env, "quiet") == 0) return LogLevel::kQuiet;
  return LogLevel::kInfo;
}

std::atomic<LogLevel>& level_ref() {
  static std::atomic<LogLevel> level{initial_level()};
  return level;
}

}  // namespace

LogLevel log_level() { return level_ref().load(std::memory_order_relaxed); }
void set_log_level(LogLevel level) { level_ref().store(level); }

void log_line(LogLevel level, const std::string& line) {
  static std::mutex mu;
  static const char* kNames[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[%s] %s\n", kNames[static_cast<int>(level)], line.c_str());
}

}  // namespace ponder
