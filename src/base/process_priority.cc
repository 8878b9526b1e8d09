#include "base/process_priority.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstring>

namespace ponder {

Status set_process_priority(int level) {
  if (level < 0 || level > 3)
    return Status::errorf("--prio {}: expected 0 (normal) to 3 (highest)", level);
  if (level == 0) return Status::ok();
  const int nice_value = -5 * level;
  if (setpriority(PRIO_PROCESS, 0, nice_value) != 0) {
    return Status::errorf(
        "cannot raise the priority to nice {} ({}): that needs root or CAP_SYS_NICE; "
        "running at nice {}",
        nice_value, std::strerror(errno), getpriority(PRIO_PROCESS, 0));
  }
  return Status::ok();
}

}  // namespace ponder
