// What the AVX2 and AVX-512 block-attention kernels (kernels/block_attention.h) share at any vector
// width: the next block's prefetch spread through a kernel's work, the rows of a converted block
// past n as zeros, a block's row pointers past `valid` at zero bytes, and the split of a row's
// query vectors into groups of at most six, each a compile-time count, and the int8 variant's
// queries from a group's first. Included only inside the
// anonymous namespace of each ISA's translation unit (see x86/tile_driver.h for why nothing is
// shared inline across ISAs); depends on <immintrin.h>, <algorithm> and <utility>, included by the
// including file.
#pragma once

// The lines of the next block's rows that a kernel step asks for (prefetcht1, into L2): spread
// evenly through a block's work, the next block's V rows during the scores and its K rows during
// the V sums. rows == nullptr: nothing. Measured on Zen 4 (bf16 cache, attention alone, decode at
// 16384, 2 threads, alternated in one process, medians of 41): all 128 lines during the V sums
// 28.0 ms, half in each phase 22.8 (K during the scores) and 21.6 (as here); no prefetch 35-48 ms.
// f16 cache with f32 scores: 38-50 -> 27-29 ms against one burst before the block (alternated
// runs); Q8_0 (its conversions and f32 products bound it): no change beyond the noise.
struct Prefetch {
  const uint8_t* const* rows = nullptr;  // [16]
  int64_t row_bytes = 0;
  // Lines [l0, l1) of row p (those inside it).
  void lines_of_row(int p, int64_t l0, int64_t l1) const {
    if (rows == nullptr) return;
    for (int64_t l = l0; l < l1 && 64 * l < row_bytes; ++l)
      _mm_prefetch(reinterpret_cast<const char*>(rows[p] + 64 * l), _MM_HINT_T1);
  }
};

// The next block's lines for the first six queries of a full block (Prefetch): its V rows during
// the scores, its K rows during the V sums.
inline Prefetch next_v(const BlockRows* next, int valid, int h0) {
  return next != nullptr && h0 == 0 && valid == kAttnBlock ? Prefetch{next->v, next->v_bytes}
                                                           : Prefetch{};
}
inline Prefetch next_k(const BlockRows* next, int valid, int h0) {
  return next != nullptr && h0 == 0 && valid == kAttnBlock ? Prefetch{next->k, next->k_bytes}
                                                           : Prefetch{};
}

// The 16 rows of `width` elements of a converted block at out: row(p, out + p * width) writes row p
// for p < n, the rest are zeros.
template <class T, class Row>
inline void rows_or_zeros(int n, int64_t width, T* out, const Row& row) {
  for (int p = 0; p < kAttnBlock; ++p) {
    T* o = out + p * width;
    if (p < n) {
      row(p, o);
    } else {
      std::fill(o, o + width, T{});
    }
  }
}

// A step's row pointers with the rows at and past `valid` pointing at zero bytes (+0 as an f16,
// a bf16 or a Q8_0 block: scale and codes 0), for the kernels that read positions by groups.
// n rows, at most kAttnStepBf16; a row at most 512 bytes.
template <class T>
struct RowsZeroPast {
  const T* rows[kAttnStepBf16];
  RowsZeroPast(const T* const* r, int valid, int n = kAttnBlock) {
    alignas(64) static const uint8_t kZeros[512] = {};
    for (int p = 0; p < n; ++p) rows[p] = p < valid ? r[p] : reinterpret_cast<const T*>(kZeros);
  }
};

// run(H, first query) over n_q queries, six at a time, H (1..6) a std::integral_constant.
template <class Run>
void in_sixes(int n_q, const Run& run) {
  for (int h0 = 0; h0 < n_q; h0 += 6) {
    const int n = std::min(6, n_q - h0);
    [&]<int... I>(std::integer_sequence<int, I...>) {
      ((n == I + 1 ? run(std::integral_constant<int, I + 1>(), h0) : void()), ...);
    }
    (std::make_integer_sequence<int, 6>());
  }
}

// The int8-scores variant's query vectors from h0 on (hd / 32 blocks and block sums each).
inline QueriesQ8 queries_from(QueriesQ8 q, int h0, int64_t hd) {
  return {q.q + h0 * (hd / kQK), q.qsum + h0 * (hd / kQK)};
}
