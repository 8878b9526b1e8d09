// PGLD: the golden-logits file format of ../shared/golden/README.md, read and written.
// A file holds a token sequence (prompt, then a greedy continuation) and for every row either the
// full logits or the top-k logits with the row's log-sum-exp.
// Depends on base.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace ponder {

struct PgldRow {
  float lse = 0;                               // log-sum-exp of all logits of the row
  std::vector<std::pair<int32_t, float>> top;  // k > 0: (id, logit) sorted by logit descending
  std::vector<float> full;                     // k == 0: all n_vocab logits
};

struct Pgld {
  uint32_t n_vocab = 0;
  uint32_t n_prompt = 0;
  uint32_t n_gen = 0;
  uint32_t k = 0;
  std::vector<int32_t> tokens;  // [n_prompt + n_gen]
  std::vector<PgldRow> rows;    // [n_prompt + n_gen]

  static Expected<Pgld> read(const std::string& path);
  Status write(const std::string& path) const;

  // Builds a row from full logits: keeps all of them (k == 0) or the top k.
  static PgldRow make_row(const float* logits, int64_t n_vocab, uint32_t k);
};

// Comparison of a row's logits with a golden row (teacher forcing), per the golden README.
struct LogitDiff {
  double sum_dlogp = 0;
  double max_dlogp = 0;
  int64_t n_dlogp = 0;
  int64_t n_top1_rows = 0;   // rows whose golden margin > 0.1
  int64_t n_top1_agree = 0;  // of those, rows where our argmax is the golden top-1

  void add_row(const PgldRow& golden, const float* logits, int64_t n_vocab);
  double mean() const { return n_dlogp ? sum_dlogp / n_dlogp : 0; }
  double top1_rate() const { return n_top1_rows ? double(n_top1_agree) / n_top1_rows : 1; }
};

double log_sum_exp(const float* x, int64_t n);

}  // namespace ponder
