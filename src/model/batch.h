// Batch: the input of one forward pass. Rows may mix a prompt chunk of one sequence with decode
// tokens of others; each row names its token, its position and its sequence, and whether its
// logits are wanted. block_tables[seq] lists the KV blocks of that sequence in position order:
// position p lives in block block_tables[seq][p / block_size], slot p % block_size. All positions
// before a row's own must already be in the cache or earlier in the same batch.
// Depends on nothing.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ponder {

struct BatchRow {
  int32_t token = 0;
  int32_t pos = 0;
  int32_t seq = 0;
  bool logits = false;
};

struct Batch {
  std::vector<BatchRow> rows;
  std::vector<std::span<const int32_t>> block_tables;  // indexed by seq

  int64_t n_logit_rows() const {
    int64_t n = 0;
    for (const BatchRow& r : rows) n += r.logits;
    return n;
  }
};

}  // namespace ponder
