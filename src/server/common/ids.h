// What answers stamp themselves with: random ids (hex digits from a per-thread generator seeded by
// the OS; ids, not secrets) and the Unix time in seconds.
// Depends on the standard library only.
#pragma once

#include <cstdint>
#include <string>

namespace ponder::server {

uint64_t random_u64();
std::string random_hex(int digits);  // "3f9a..." of that many hex digits
int64_t unix_seconds();

}  // namespace ponder::server
