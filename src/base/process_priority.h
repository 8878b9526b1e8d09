// Process priority, as the users' guides set it by hand with `nice`: a server on a shared laptop
// keeps its tokens flowing while other programs run.
// Depends on base/status.h.
#pragma once

#include "base/status.h"

namespace ponder {

// level 0 leaves the priority alone; 1, 2, 3 set the nice value to -5, -10, -15 (higher
// priority). Raising it needs root or CAP_SYS_NICE: the error says so, and the process keeps
// running at its old priority.
Status set_process_priority(int level);

}  // namespace ponder
