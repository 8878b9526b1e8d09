#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <string>

namespace ponder::grammar {

std::vector<CodeRange> normalize_code_ranges(std::vector<CodeRange> r, bool negated) {
  std::sort(r.begin(), r.end(), [](const CodeRange& a, const CodeRange& b) { return a.lo < b.lo; });
  std::vector<CodeRange> merged;
  for (const CodeRange& x : r) {
    if (!merged.empty() && x.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, x.hi);
    } else {
      merged.push_back(x);
    }
  }
  if (negated) {
    std::vector<CodeRange> inv;
    uint32_t next = 0;
    for (const CodeRange& x : merged) {
      if (x.lo > next) inv.push_back({next, x.lo - 1});
      next = x.hi + 1;
    }
    if (next <= 0x10FFFF) inv.push_back({next, 0x10FFFF});
    merged = std::move(inv);
  }
  std::vector<CodeRange> out;
  for (const CodeRange& x : merged) {
    if (x.hi < 0xD800 || x.lo > 0xDFFF) {
      out.push_back(x);
      continue;
    }
    if (x.lo < 0xD800) out.push_back({x.lo, 0xD7FF});
    if (x.hi > 0xDFFF) out.push_back({0xE000, x.hi});
  }
  return out;
}

namespace {

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// lo and hi have the same encoded length; splits until every byte position is a full range.
void split(uint32_t lo, uint32_t hi, std::vector<std::vector<ByteRange>>* out) {
  static constexpr uint32_t kMaxOfLength[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t m : kMaxOfLength) {
    if (lo <= m && hi > m) {
      split(lo, m, out);
      split(m + 1, hi, out);
      return;
    }
  }
  const int n = encoded_length(lo);
  if (n == 1) {
    out->push_back({{static_cast<uint8_t>(lo), static_cast<uint8_t>(hi)}});
    return;
  }
  // The trailing i bytes (6 bits each) must run over their whole range once lo and hi differ
  // above them.
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(lo, &a);
  append_utf8(hi, &b);
  std::vector<ByteRange> seq;
  for (size_t i = 0; i < a.size(); ++i)
    seq.push_back({static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i])});
  out->push_back(std::move(seq));
}

}  // namespace

std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodeRange>& ranges,
                                                   bool negated) {
  std::vector<std::vector<ByteRange>> out;
  for (const CodeRange& r : normalize_code_ranges(ranges, negated)) split(r.lo, r.hi, &out);
  std::stable_partition(out.begin(), out.end(),
                        [](const std::vector<ByteRange>& s) { return s.size() == 1; });
  return out;
}

}  // namespace ponder::grammar
