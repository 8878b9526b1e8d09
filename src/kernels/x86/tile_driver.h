// The loop nests and table plumbing shared by the x86 matmul kernels: output rows in blocks that
// stay in L2 while every tile of activation rows passes over them, and inside a block tiles of kW
// weight rows x kR activation rows, so unpacked weights are reused across activation rows and
// activation loads across weight rows. A tile only changes which outputs are computed together,
// never the float operations of one output, so results do not depend on the tiling (batch
// invariance). Also the gemm entry of a row-major kernel, the MatmulKernel entry made from a kernel
// struct, and the lookup in a file's table of kernels.
//
// Included only by the per-ISA translation units (x86/matmul_*.cc), inside their anonymous
// namespace: each ISA gets its own internal-linkage copy compiled with its own target flags (an
// inline function with external linkage compiled with AVX-512 could otherwise be the copy the
// linker keeps for every caller). For the same reason those files call no inline functions of
// shared headers.
#pragma once

// Expects <cstdint> and kernels/kernel_table.h to be included by the including file (outside the
// namespace), and the ISA of the file's kernels declared before it: constexpr Isa kIsa.

// Kernel K provides
//   static constexpr int kW, kR;  // tile sizes when n_rows > 1 (a single row uses W = 1)
//   static int64_t packed_row_bytes(int64_t n_in);
//   template <int W, int R>
//   static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
//                    int64_t x_row_bytes, float* y, int64_t y_stride);
// where tile computes y[r * y_stride + i] for i < W, r < R from weight rows w + i * w_row_bytes
// and packed activation rows x + r * x_row_bytes, and for gemm_rows
//   using Block = ...;                     // one weight block of a ggml row
//   static constexpr int kBlockElems;      // the elements it holds

template <class K, int W, int R = K::kR>
inline void dispatch_rows(int rr, const uint8_t* w, int64_t w_row_bytes, int64_t n_in,
                          const uint8_t* x, int64_t x_row_bytes, float* y, int64_t y_stride) {
  if (rr == R) {
    K::template tile<W, R>(w, w_row_bytes, n_in, x, x_row_bytes, y, y_stride);
    return;
  }
  if constexpr (R > 1) {
    dispatch_rows<K, W, R - 1>(rr, w, w_row_bytes, n_in, x, x_row_bytes, y, y_stride);
  }
}

template <class K>
void gemm_tiled(const uint8_t* w_data, int64_t w_row_bytes, int64_t n_in, const void* xp,
                int64_t n_rows, int64_t o_begin, int64_t o_end, float* y, int64_t y_stride) {
  const int64_t x_row_bytes = K::packed_row_bytes(n_in);
  const uint8_t* x = static_cast<const uint8_t*>(xp);
  // ~16 rows of the widest weights (ffn_down, n_in 8960, Q6_K: 7.4 KB a row) fit in L2 with room.
  constexpr int64_t kOBlock = 16;
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int64_t r = 0; r < n_rows; r += K::kR) {
      const int rr = static_cast<int>(n_rows - r < K::kR ? n_rows - r : K::kR);
      const uint8_t* xr = x + r * x_row_bytes;
      float* yr = y + r * y_stride;
      int64_t o = ob;
      // A single activation row streams the weights from memory: one weight row at a time, as
      // tiles of several rows read as interleaved streams measured 3x slower here.
      const int64_t w_tile = n_rows == 1 ? 1 : K::kW;
      for (; o + w_tile <= oe && w_tile > 1; o += w_tile) {
        dispatch_rows<K, K::kW>(rr, w_data + o * w_row_bytes, w_row_bytes, n_in, xr, x_row_bytes,
                                yr + o, y_stride);
      }
      for (; o < oe; ++o) {
        dispatch_rows<K, 1>(rr, w_data + o * w_row_bytes, w_row_bytes, n_in, xr, x_row_bytes,
                            yr + o, y_stride);
      }
    }
  }
}

// MatmulKernel::gemm for weights stored as ggml rows (w.data) of K::Block blocks.
template <class K>
void gemm_rows(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin, int64_t o_end,
               float* y, int64_t y_stride) {
  const int64_t w_row_bytes =
      w.n_in / K::kBlockElems * static_cast<int64_t>(sizeof(typename K::Block));
  gemm_tiled<K>(static_cast<const uint8_t*>(w.data), w_row_bytes, w.n_in, xp, n_rows, o_begin,
                o_end, y, y_stride);
}

// A single activation row streams kGemvW weight rows at a time (several outputs' dependency chains
// in flight, K::kGemvW), batches go to gemm_tiled: gemm_rows for the kernels whose one-row tiles
// are latency-bound rather than memory-bound (BF16).
template <class K>
void gemm_rows_gemv(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                    int64_t o_end, float* y, int64_t y_stride) {
  if (n_rows != 1) return gemm_rows<K>(w, xp, n_rows, o_begin, o_end, y, y_stride);
  const uint8_t* wd = static_cast<const uint8_t*>(w.data);
  const int64_t w_row_bytes =
      w.n_in / K::kBlockElems * static_cast<int64_t>(sizeof(typename K::Block));
  const uint8_t* x = static_cast<const uint8_t*>(xp);
  const int64_t x_row_bytes = K::packed_row_bytes(w.n_in);
  int64_t o = o_begin;
  for (; o + K::kGemvW <= o_end; o += K::kGemvW) {
    K::template tile<K::kGemvW, 1>(wd + o * w_row_bytes, w_row_bytes, w.n_in, x, x_row_bytes, y + o,
                                   y_stride);
  }
  for (; o < o_end; ++o) {
    K::template tile<1, 1>(wd + o * w_row_bytes, w_row_bytes, w.n_in, x, x_row_bytes, y + o,
                           y_stride);
  }
}

// The loop of the kernels whose tile is a group of K::kGroupRows weight rows, one per vector lane
// (Q4_0: x86/matmul_legacy_*.cc), for kR activation rows, with K::kOBlock weight rows kept in L2
// while the activation tiles pass. K provides
//   template <int R>
//   static void tile(const uint8_t* w, int64_t w_row_bytes, int n_valid, int64_t nb,
//                    const uint8_t* x, int64_t x_row_bytes, float* y, int64_t y_stride);
// which computes y[r * y_stride + i] for i < n_valid (<= kGroupRows), r < R, from nb blocks.
template <class K, int R = K::kR>
void dispatch_group_rows(int rr, const uint8_t* w, int64_t w_row_bytes, int n_valid, int64_t nb,
                         const uint8_t* x, int64_t x_row_bytes, float* y, int64_t y_stride) {
  if (rr == R) {
    K::template tile<R>(w, w_row_bytes, n_valid, nb, x, x_row_bytes, y, y_stride);
    return;
  }
  if constexpr (R > 1)
    dispatch_group_rows<K, R - 1>(rr, w, w_row_bytes, n_valid, nb, x, x_row_bytes, y, y_stride);
}

template <class K>
void gemm_row_groups(const WeightView& w, const void* xp, int64_t n_rows, int64_t o_begin,
                     int64_t o_end, float* y, int64_t y_stride) {
  constexpr int kR = K::kR, kOBlock = K::kOBlock, kG = K::kGroupRows;
  const int64_t nb = w.n_in / K::kBlockElems;
  const int64_t row_bytes = nb * static_cast<int64_t>(sizeof(typename K::Block));
  const int64_t x_row_bytes = K::packed_row_bytes(w.n_in);
  const uint8_t* wd = static_cast<const uint8_t*>(w.data);
  const uint8_t* x = static_cast<const uint8_t*>(xp);
  for (int64_t ob = o_begin; ob < o_end; ob += kOBlock) {
    const int64_t oe = ob + kOBlock < o_end ? ob + kOBlock : o_end;
    for (int64_t r = 0; r < n_rows; r += kR) {
      const int rr = static_cast<int>(n_rows - r < kR ? n_rows - r : kR);
      for (int64_t o = ob; o < oe; o += kG) {
        const int n_valid = static_cast<int>(oe - o < kG ? oe - o : kG);
        dispatch_group_rows<K>(rr, wd + o * row_bytes, row_bytes, n_valid, nb, x + r * x_row_bytes,
                               x_row_bytes, y + r * y_stride + o, y_stride);
      }
    }
  }
}

// The table entry of kernel struct K: its own gemm if it has one (a loop of its own), else
// gemm_row_groups<K> if it has a kGroupRows, gemm_rows_gemv<K> if it has a kGemvW, else
// gemm_rows<K>.
template <class K>
constexpr MatmulKernel make_kernel(GgmlType type, const char* name) {
  constexpr Isa isa = kIsa;
  if constexpr (requires { &K::gemm; }) {
    return {type, isa, name, K::packed_row_bytes, K::pack_row, K::gemm};
  } else if constexpr (requires { K::kGroupRows; }) {
    return {type, isa, name, K::packed_row_bytes, K::pack_row, gemm_row_groups<K>};
  } else if constexpr (requires { K::kGemvW; }) {
    return {type, isa, name, K::packed_row_bytes, K::pack_row, gemm_rows_gemv<K>};
  } else {
    return {type, isa, name, K::packed_row_bytes, K::pack_row, gemm_rows<K>};
  }
}

// The entry of `table` for weights of `type`, or nullptr.
template <int N>
const MatmulKernel* find_kernel(const MatmulKernel (&table)[N], GgmlType type) {
  for (const MatmulKernel& k : table) {
    if (k.type == type) return &k;
  }
  return nullptr;
}
