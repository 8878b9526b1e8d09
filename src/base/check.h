// CHECK: invariants that hold unless the program itself is wrong. A failed CHECK prints where and
// why and aborts; input errors never use it (they return a Status). DCHECK is CHECK in debug only.
#pragma once

#include <cstdio>
#include <cstdlib>

#define PONDER_CHECK(cond)                                                          \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                 \
    }                                                                               \
  } while (0)

#ifdef NDEBUG
#define PONDER_DCHECK(cond) \
  do {                      \
  } while (0)
#else
#define PONDER_DCHECK(cond) PONDER_CHECK(cond)
#endif
