// Replaces the global operator new/delete of a test binary to count heap allocations, so tests
// can check that a hot path allocates nothing. In its own file so that the compiler never sees
// the malloc/free pairs beside a new-expression (GCC would warn about a mismatch).
#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_allocations{0};
}  // namespace

namespace ponder::testing_support {
long allocation_count() { return g_allocations.load(std::memory_order_relaxed); }
}  // namespace ponder::testing_support

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The other forms the standard library uses (std::stable_sort's temporary buffer takes the
// nothrow one): replaced too, so every new meets its matching delete (ASan checks the pairing).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
