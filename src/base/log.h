// Logging to stderr with a level. Library code logs; it never prints to stdout (that belongs to
// the command's output) and never exits.
#pragma once

#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <utility>

namespace ponder {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kQuiet = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_line(LogLevel level, const std::string& line);

template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kInfo)
    log_line(LogLevel::kInfo, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kWarn)
    log_line(LogLevel::kWarn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_debug(fmt::format_string<Args...> f, Args&&... args) {
  if (log_level() <= LogLevel::kDebug)
    log_line(LogLevel::kDebug, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ponder
