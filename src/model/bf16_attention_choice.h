// Whether the block order's bf16 attention (a bf16 KV cache, or bf16 scores on an f16 cache:
// vdpbf16ps) is the default, against an f16 cache with f32 scores: the same bytes, the f16 one
// closer to the exact computation (docs/numerics.md). Measured (BENCHMARKS.md sessions 13, 33,
// 34): vdpbf16ps runs as fast as an f32 FMA on AMD's Zen 4 and Zen 5, where the bf16 cache's
// decode kernel is 1.3-1.7x the f16 one's, and at a quarter of an FMA's rate on Intel's Raptor
// Cove cores, where the bf16 cache was the slowest at depth. So the default is bf16 where the
// bf16 kernels are native on an AMD CPU, else f16. A rule of the CPU, not a timing at load: a
// choice timed at each start flipped between restarts on a loaded machine (two sizes close in
// speed), and with it the answers a restarted server gives. PONDER_BF16_ATTN=on|off forces it;
// time_bf16_attention measures the two kernels for `ponder bench` to show the rule against this
// machine. Depends on cpu and kernels/block_attention.h.
#pragma once

#include <cstdint>

namespace ponder {

struct Bf16AttentionChoice {
  bool bf16 = false;     // the choice: bf16 attention by default
  const char* why = "";  // what decided it
};

// For a head size (the bf16 kernels must take it).
Bf16AttentionChoice bf16_attention_choice(int64_t head_dim);

// One 512-position chunk (in L2) through the bf16-cache decode kernel and through the f16 cache
// with f32 scores for a query group, five alternated rounds; the best pass of each in ns. Both
// 0 where the two kernels are not both native.
struct Bf16AttentionTiming {
  double ns_bf16 = 0, ns_f16 = 0;
};
Bf16AttentionTiming time_bf16_attention(int64_t head_dim, int64_t group);

}  // namespace ponder
