#include "model/pgld.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>

#include "base/mapped_file.h"

namespace ponder {

double log_sum_exp(const float* x, int64_t n) {
  const float mx = *std::max_element(x, x + n);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - mx);
  return mx + std::log(s);
}

Expected<Pgld> Pgld::read(const std::string& path) {
  PONDER_ASSIGN_OR_RETURN(MappedFile map, MappedFile::open(path));
  const uint8_t* p = map.data();
  size_t left = map.size();
  auto take = [&](void* out, size_t n) {
    if (n > left) return false;
    std::memcpy(out, p, n);
    p += n;
    left -= n;
    return true;
  };
  char magic[4];
  uint32_t version;
  Pgld g;
  if (!take(magic, 4) || std::memcmp(magic, "PGLD", 4) != 0)
    return Status::errorf("{}: not a PGLD file", path);
  if (!take(&version, 4) || version != 1)
    return Status::errorf("{}: unsupported PGLD version", path);
  if (!take(&g.n_vocab, 4) || !take(&g.n_prompt, 4) || !take(&g.n_gen, 4) || !take(&g.k, 4)) {
    return Status::errorf("{}: truncated header", path);
  }
  const uint64_t n_rows = uint64_t(g.n_prompt) + g.n_gen;
  const uint64_t row_bytes = g.k == 0 ? 4ull * g.n_vocab : 4 + 8ull * g.k;
  if (g.k > g.n_vocab || n_rows * 4 + n_rows * row_bytes != left) {
    return Status::errorf("{}: size {} does not match its header", path, map.size());
  }
  g.tokens.resize(n_rows);
  take(g.tokens.data(), n_rows * 4);
  g.rows.resize(n_rows);
  for (PgldRow& row : g.rows) {
    if (g.k == 0) {
      row.full.resize(g.n_vocab);
      take(row.full.data(), 4ull * g.n_vocab);
      row.lse = static_cast<float>(log_sum_exp(row.full.data(), g.n_vocab));
    } else {
      take(&row.lse, 4);
      row.top.resize(g.k);
      for (auto& [id, logit] : row.top) {
        take(&id, 4);
        take(&logit, 4);
      }
    }
  }
  return g;
}

Status Pgld::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(tmp.c_str(), "wb"), std::fclose);
  if (!f) return Status::errorf("cannot create {}", tmp);
  bool ok = true;
  auto put = [&](const void* d, size_t n) { ok = ok && std::fwrite(d, 1, n, f.get()) == n; };
  const uint32_t version = 1;
  put("PGLD", 4);
  put(&version, 4);
  put(&n_vocab, 4);
  put(&n_prompt, 4);
  put(&n_gen, 4);
  put(&k, 4);
  put(tokens.data(), tokens.size() * 4);
  for (const PgldRow& row : rows) {
    if (k == 0) {
      put(row.full.data(), row.full.size() * 4);
    } else {
      put(&row.lse, 4);
      for (const auto& [id, logit] : row.top) {
        put(&id, 4);
        put(&logit, 4);
      }
    }
  }
  ok = ok && std::fflush(f.get()) == 0;
  f.reset();
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::errorf("cannot write {}", path);
  }
  return Status::ok();
}

PgldRow Pgld::make_row(const float* logits, int64_t n_vocab, uint32_t k) {
  PgldRow row;
  row.lse = static_cast<float>(log_sum_exp(logits, n_vocab));
  if (k == 0) {
    row.full.assign(logits, logits + n_vocab);
    return row;
  }
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const int64_t kk = std::min<int64_t>(k, n_vocab);
  std::partial_sort(ids.begin(), ids.begin() + kk, ids.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  for (int64_t i = 0; i < kk; ++i) row.top.emplace_back(ids[i], logits[ids[i]]);
  return row;
}

void LogitDiff::add_row(const PgldRow& golden, const float* logits, int64_t n_vocab) {
  const double lse = log_sum_exp(logits, n_vocab);
  const int64_t argmax = std::max_element(logits, logits + n_vocab) - logits;
  std::vector<std::pair<int32_t, float>> top = golden.top;
  if (top.empty()) top = Pgld::make_row(golden.full.data(), n_vocab, 64).top;
  for (const auto& [id, logit] : top) {
    const double d = std::fabs((logit - golden.lse) - (logits[id] - lse));
    sum_dlogp += d;
    max_dlogp = std::max(max_dlogp, d);
    ++n_dlogp;
  }
  if (top.size() >= 2 && top[0].second - top[1].second > 0.1f) {
    ++n_top1_rows;
    n_top1_agree += argmax == top[0].first;
  }
}

}  // namespace ponder
