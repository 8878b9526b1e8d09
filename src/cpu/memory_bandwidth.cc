#include "cpu/memory_bandwidth.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "base/huge_pages.h"
#include "base/timer.h"
#include "cpu/cpu_features.h"

namespace ponder {

namespace {

// One pass over [b, e) with the widest loads the CPU has, four independent accumulators so the
// loop is bound by loads: the read rate a streaming kernel can reach (session 29: scalar loads
// over 4 KiB pages measured 35.7 GB/s on a Zen 5 whose decode read its weights at 42).
#if defined(__x86_64__)
[[gnu::target("avx512f")]] uint64_t read_avx512(const uint8_t* b, const uint8_t* e) {
  __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
  for (; b + 256 <= e; b += 256) {
    a0 = _mm512_xor_si512(a0, _mm512_load_si512(b));
    a1 = _mm512_xor_si512(a1, _mm512_load_si512(b + 64));
    a2 = _mm512_xor_si512(a2, _mm512_load_si512(b + 128));
    a3 = _mm512_xor_si512(a3, _mm512_load_si512(b + 192));
  }
  const __m512i a = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
  alignas(64) uint64_t w[8];
  _mm512_store_si512(w, a);
  return w[0] ^ w[7];
}

[[gnu::target("avx2")]] uint64_t read_avx2(const uint8_t* b, const uint8_t* e) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (; b + 128 <= e; b += 128) {
    a0 = _mm256_xor_si256(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(b)));
    a1 = _mm256_xor_si256(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32)));
    a2 = _mm256_xor_si256(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 64)));
    a3 = _mm256_xor_si256(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 96)));
  }
  const __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
  alignas(32) uint64_t w[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), a);
  return w[0] ^ w[3];
}
#endif

uint64_t read_words(const uint8_t* b, const uint8_t* e) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(b);
  const uint64_t* we = reinterpret_cast<const uint64_t*>(e);
  uint64_t s[4] = {};
  for (; w + 4 <= we; w += 4) {
    for (int k = 0; k < 4; ++k) s[k] ^= w[k];
  }
  return s[0] ^ s[1] ^ s[2] ^ s[3];
}

uint64_t read_pass(const uint8_t* b, const uint8_t* e) {
#if defined(__x86_64__)
  if (cpu_features().avx512f) return read_avx512(b, e);
  if (cpu_features().avx2) return read_avx2(b, e);
#endif
  return read_words(b, e);
}

}  // namespace

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int reps) {
  // In 2 MiB pages, as the weights are (base/huge_pages.h); each thread first-touches its own
  // part, as the model's weights are touched by the threads that read them.
  bytes = bytes / kHugePage * kHugePage;
  const HugePages buf = alloc_huge_pages(bytes);
  if (buf == nullptr) return 0;
  const int64_t n_pages = static_cast<int64_t>(bytes / kHugePage);
  pool.parallel_for(n_pages, 1, [&](int64_t b, int64_t e) {
    std::memset(buf.get() + b * kHugePage, 1, static_cast<size_t>(e - b) * kHugePage);
  });
  std::vector<uint64_t> sinks(static_cast<size_t>(pool.size()));
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    Timer t;
    pool.run([&](int ti, int nt) {
      const int64_t pb = n_pages * ti / nt, pe = n_pages * (ti + 1) / nt;
      sinks[static_cast<size_t>(ti)] ^=
          read_pass(buf.get() + pb * kHugePage, buf.get() + pe * kHugePage);
    });
    best = std::max(best, static_cast<double>(bytes) / t.seconds() / 1e9);
  }
  volatile uint64_t keep = 0;
  for (uint64_t v : sinks) keep = keep ^ v;
  (void)keep;
  return best;
}

double measure_read_bandwidth_gbs_apart(int n_threads) {
  auto here = [n_threads] {
    ThreadPool pool(n_threads);
    return measure_read_bandwidth_gbs(pool);
  };
  int fds[2];
  if (::pipe(fds) != 0) return here();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const double gbs = here();
    const ssize_t n = ::write(fds[1], &gbs, sizeof gbs);
    ::_exit(n == sizeof gbs ? 0 : 1);
  }
  ::close(fds[1]);
  double gbs = 0;
  const bool ok = pid > 0 && ::read(fds[0], &gbs, sizeof gbs) == sizeof gbs;
  ::close(fds[0]);
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  return ok ? gbs : here();
}

size_t peak_rss_bytes() {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<size_t>(ru.ru_maxrss) * 1024;
}

}  // namespace ponder
