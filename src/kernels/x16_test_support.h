// What the kernels' tests share: a 64-byte aligned buffer and the x16 copy of a weight matrix in
// one (as the model's loader makes it).
// Depends on kernels/interleave.h, kernels/matmul.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/interleave.h"
#include "kernels/matmul.h"

namespace ponder {

// A 64-byte aligned byte buffer.
class AlignedBuffer {
 public:
  explicit AlignedBuffer(int64_t n) : storage_(static_cast<size_t>(n) + 64) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(storage_.data());
    data_ = storage_.data() + ((64 - p % 64) % 64);
  }
  uint8_t* data() { return data_; }

 private:
  std::vector<uint8_t> storage_;
  uint8_t* data_;
};

// The x16 copy of w, 64-byte aligned.
inline AlignedBuffer interleaved(const WeightView& w) {
  AlignedBuffer buf(x16_bytes(w));
  x16_interleave(w, 0, w.n_out / kX16Rows, buf.data());
  return buf;
}

}  // namespace ponder
