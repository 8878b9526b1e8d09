// The tile (x86/tile_driver.h) of the matmul kernels whose outputs follow llama.cpp's vec_dot
// order: per output one 8-lane float accumulator (and, for the min terms some types add apart,
// one 4-lane one) updated once per weight block, summed by hsum8 at the end. The kernel struct
// owns what happens inside a block (its integer sums and its float steps, in the reference's
// order); this owns the loops around it, the same for every such kernel and ISA.
//
// Included only inside the anonymous namespace of the per-ISA translation units, after
// x86/avx2_basics.h and x86/tile_driver.h (see x86/tile_driver.h for why).

// Kernel K derives from BlockTiled<K, Act, Block, kBlockElems, kR> (kR activation rows a tile),
// where Act is one block of a packed activation row with
//   static void pack(const float* x, Act* a);  // quantizes the kBlockElems values at x into a
// and Block one weight block of kBlockElems elements, and provides
//   template <int R>
//   static void block(int64_t b, const Block* wb, const Act* const (&xa)[R], __m256 (&acc)[R],
//                     __m128 (&acc2)[R]);
//   static float finish(__m256 acc, __m128 acc2);  // the output from its accumulators, where it
//                                                  // is not hsum8(acc) (BlockTiled's)
// where block adds weight block b (wb) times activation blocks xa[r] to the accumulators of
// activation row r. Both accumulators start at zero.
//
// tile is never inlined into gemm_tiled: inlined there, GCC kept fewer accumulators in registers
// (more spills in the generated code of the 4-row tiles than when each tile is its own function,
// as it was before this header).
template <class K, class ActT, class BlockT, int kElems, int kRows>
struct BlockTiled {
  using Act = ActT;
  using Block = BlockT;
  static constexpr int kBlockElems = kElems;
  static constexpr int kW = 1, kR = kRows;  // one weight row a tile (x86/tile_driver.h)
  // The argument types of K::block.
  template <int R>
  using Rows = const Act* const (&)[R];
  template <int R>
  using Acc = __m256 (&)[R];
  template <int R>
  using Acc2 = __m128 (&)[R];

  static int64_t packed_row_bytes(int64_t n_in) {
    return round_up_64(n_in / kElems * static_cast<int64_t>(sizeof(Act)));
  }

  static float finish(__m256 acc, __m128) { return hsum8(acc); }

  static void pack_row(const float* x, void* dst, int64_t n_in) {
    Act* a = static_cast<Act*>(dst);
    for (int64_t b = 0; b < n_in / kElems; ++b) Act::pack(x + b * kElems, a + b);
  }

  template <int W, int R>
  [[gnu::noinline]] static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in,
                                     const uint8_t* x, int64_t x_row_bytes, float* y,
                                     int64_t y_stride) {
    __m256 acc[W][R];
    __m128 acc2[W][R];
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[i][r] = _mm256_setzero_ps();
        acc2[i][r] = _mm_setzero_ps();
      }
    }
    for (int64_t b = 0; b < n_in / kElems; ++b) {
      const Act* xa[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xa[r] = reinterpret_cast<const Act*>(x + r * x_row_bytes) + b;
#pragma GCC unroll 8
      for (int i = 0; i < W; ++i) {
        const Block* wb = reinterpret_cast<const Block*>(w + i * w_row_bytes) + b;
        K::template block<R>(b, wb, xa, acc[i], acc2[i]);
      }
    }
#pragma GCC unroll 8
    for (int i = 0; i < W; ++i) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) y[r * y_stride + i] = K::finish(acc[i][r], acc2[i][r]);
    }
  }
};

// acc[r] += (dx * dw) * sumi[r] lane by lane (dx = xa[r]->d): the float step of the super-block
// orders, once per block after its exact integer sums.
template <int R, class Act>
void add_scaled_sums(float wd, const Act* const (&xa)[R], const __m256i (&sumi)[R],
                     __m256 (&acc)[R]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    const float d = xa[r]->d * wd;
    acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi[r]), acc[r]);
  }
}
