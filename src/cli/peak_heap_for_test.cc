// Replaces the global operator new/delete of a test binary to track the heap's live and peak
// bytes, so that a test can bound what loading a file allocates. In its own file so that the
// compiler never sees the malloc/free pairs beside a new-expression.
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {
std::atomic<long> g_live{0}, g_peak{0};
void* track(void* p) {
  if (p == nullptr) return p;
  const long now = g_live.fetch_add(static_cast<long>(malloc_usable_size(p))) +
                   static_cast<long>(malloc_usable_size(p));
  long peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  return p;
}
void untrack(void* p) {
  if (p != nullptr) g_live.fetch_sub(static_cast<long>(malloc_usable_size(p)));
  std::free(p);
}
}  // namespace

namespace ponder::testing_support {
long heap_live_bytes() { return g_live.load(); }
long heap_peak_bytes() { return g_peak.load(); }
void reset_heap_peak() { g_peak.store(g_live.load()); }
}  // namespace ponder::testing_support

void* operator new(std::size_t n) {
  if (void* p = track(std::malloc(n ? n : 1))) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return track(std::malloc(n ? n : 1));
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void* operator new(std::size_t n, std::align_val_t a) {
  const std::size_t al = static_cast<std::size_t>(a);
  if (void* p = track(std::aligned_alloc(al, (n + al - 1) / al * al))) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { untrack(p); }
void operator delete(void* p, std::size_t) noexcept { untrack(p); }
void operator delete[](void* p) noexcept { untrack(p); }
void operator delete[](void* p, std::size_t) noexcept { untrack(p); }
void operator delete(void* p, std::align_val_t) noexcept { untrack(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { untrack(p); }
void operator delete[](void* p, std::align_val_t) noexcept { untrack(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { untrack(p); }
