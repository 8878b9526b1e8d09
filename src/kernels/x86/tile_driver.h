// The loop nest shared by the x86 matmul kernels: output rows in blocks that stay in L2 while every
// tile of activation rows passes over them, and inside a block tiles of kW weight rows x kR
// activation rows, so unpacked weights are reused across activation rows and activation loads
// across weight rows. A tile only changes which outputs are computed together, never the float
// operations of one output, so results do not depend on the tiling (batch invariance).
//
// Included only by the per-ISA translation units (x86/matmul_*.cc), inside their anonymous
// namespace: each ISA gets its own internal-linkage copy compiled with its own target flags (an
// inline function with external linkage compiled with AVX-512 could otherwise be the copy the
// linker keeps for every caller). For the same reason those files call no inline functions of
// shared headers.
#pragma once

// Expects <cstdint> to be included by the including file (outside the namespace).

// Kernel K provides
//   static constexpr int kW, kR;  // tile sizes when n_rows > 1 (a single row uses W = 1)
//   static int64_t packed_row_bytes(int64_t n_in);
//   template <int W, int R>
//   static void tile(const uint8_t* w, int64_t w_row_bytes, int64_t n_in, const uint8_t* x,
//                    int64_t x_row_bytes, float* y, int64_t y_stride);
// where tile computes y[r * y_stride + i] for i < W, r < R from weight rows w + i * w_row_bytes
// and packed activation rows x + r * x_row_bytes.

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
