// The decode kernel of a Q8_0 K/V cache alone (kernels/block_attention.h,
// attend_block_q8_0_i8_group): one query group (6 vectors of 128 values, the 1.5B's) through
// `blocks` blocks of 16 random positions in order, the next block's rows given as decode gives
// them; the best of `passes` passes, in ns a block. 64 blocks stay in L2 (the kernel's compute);
// 57344 stream from memory (a token's worth at depth 16384 on the 1.5B: 28 layers, 2 KV heads).
// Built and run by scripts/bench/attn_block.sh; PONDER_ISA picks the level.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/block_attention.h"
#include "quant/blocks.h"
#include "quant/quantize.h"

using namespace ponder;

int main(int argc, char** argv) {
  constexpr int64_t kHd = 128;
  constexpr int kQueries = 6;
  const int64_t blocks = argc > 1 ? std::atol(argv[1]) : 64;
  const int passes = argc > 2 ? std::atoi(argv[2]) : 300;
  const int64_t row = kHd / kQK * static_cast<int64_t>(sizeof(BlockQ8_0));
  std::vector<uint8_t> k(static_cast<size_t>(blocks * 16 * row)), v(k.size());
  std::mt19937 rng(1);
  std::normal_distribution<float> g;
  std::vector<float> x(kHd);
  auto random_row = [&](uint8_t* out) {
    for (float& f : x) f = g(rng);
    quantize_row(GgmlType::Q8_0, x.data(), out, kHd);
  };
  for (int64_t r = 0; r < blocks * 16; ++r) {
    random_row(k.data() + r * row);
    random_row(v.data() + r * row);
  }
  std::vector<BlockQ8_0> qq(kQueries * kHd / kQK);
  std::vector<int32_t> qsum(qq.size());
  for (int h = 0; h < kQueries; ++h) random_row(reinterpret_cast<uint8_t*>(qq.data() + h * 4));
  for (size_t b = 0; b < qq.size(); ++b) {
    for (int8_t c : qq[b].qs) qsum[b] += c;
  }
  const BlockAttentionKernels& kern = block_attention_kernels();
  if (!kern.q8_0_i8_group_takes(kHd)) {
    std::fprintf(stderr, "no int8-scores decode kernel at this level\n");
    return 1;
  }
  std::vector<float> acc(kQueries * kHd);
  SoftmaxState st[kQueries];
  double best = 1e30;
  for (int pass = 0; pass < passes; ++pass) {
    for (int h = 0; h < kQueries; ++h) st[h] = {-INFINITY, 0.0f, acc.data() + h * kHd};
    std::fill(acc.begin(), acc.end(), 0.0f);
    const auto t0 = std::chrono::steady_clock::now();
    const uint8_t* kr[16];
    const uint8_t* vr[16];
    BlockRows next;
    next.k_bytes = next.v_bytes = row;
    for (int64_t b = 0; b < blocks; ++b) {
      for (int p = 0; p < 16; ++p) {
        kr[p] = k.data() + (b * 16 + p) * row;
        vr[p] = v.data() + (b * 16 + p) * row;
        next.k[p] = kr[p] + 16 * row;
        next.v[p] = vr[p] + 16 * row;
      }
      kern.attend_block_q8_0_i8_group(kr, vr, 16, QueriesQ8{qq.data(), qsum.data()}, kQueries, kHd,
                                      0.088f, st, b + 1 < blocks ? &next : nullptr);
    }
    const double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ns / static_cast<double>(blocks));
  }
  std::printf("%ld blocks: %.1f ns a block (best of %d passes; out[0] %.6g)\n",
              static_cast<long>(blocks), best, passes, acc[0] / st[0].l);
  return 0;
}
