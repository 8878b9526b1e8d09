// Code point ranges as UTF-8 byte-range sequences: [U+0080-U+07FF] is the one sequence
// [C2-DF][80-BF], and any range splits into a few such sequences, each matching exactly the
// encodings of its code points. This is what lets the grammar automaton read bytes. Surrogates
// (U+D800-U+DFFF) are never matched. Internal to the grammar layer.
// Depends on grammar/gbnf_parser.h (CodeRange).
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/gbnf_parser.h"

namespace ponder::grammar {

struct ByteRange {
  uint8_t lo = 0, hi = 0;  // inclusive
};

// Sorted, merged, without surrogates; complemented over U+0000-U+10FFFF when `negated`.
std::vector<CodeRange> normalize_code_ranges(std::vector<CodeRange> ranges, bool negated);

// The union of `ranges` (complemented over U+0000-U+10FFFF when `negated`) as byte sequences of
// 1-4 ranges each. The 1-byte sequences come first.
std::vector<std::vector<ByteRange>> utf8_sequences(const std::vector<CodeRange>& ranges,
                                                   bool negated);

}  // namespace ponder::grammar
