// Chooses, on this machine, whether the block order's bf16 attention (a bf16 KV cache, or bf16
// scores on an f16 cache: vdpbf16ps) is the default, against an f16 cache with f32 scores: the
// same bytes, the f16 one closer to the exact computation (docs/numerics.md), and vdpbf16ps as
// fast as an f32 FMA on Zen 4 and 5 but a quarter of its rate on Intel's Raptor Cove cores
// (BENCHMARKS.md session 33). Timed where both kernels run natively: one chunk of positions
// (in L2) through each decode kernel for the model's query group, in alternation (5 paired
// rounds, judged by their median ratio); bf16 is kept only when it is at least 10% faster.
// ~1 ms, once per process and head shape. PONDER_BF16_ATTN=on|off forces the choice.
// Depends on kernels/block_attention.h.
#pragma once

#include <cstdint>

namespace ponder {

struct Bf16AttentionChoice {
  bool measured = false;  // false: forced by the environment, or the kernels are not both native
  bool bf16 = false;      // the choice: bf16 attention by default
  double ns_bf16 = 0;     // the best pass of the bf16-cache kernel (ns a chunk)
  double ns_f16 = 0;      // the best pass of the f16 cache with f32 scores
};

// For a head size and query group (n_head / n_head_kv); where the bf16 kernels are not native,
// bf16 = false; where the f16 kernel cannot take the head size, bf16 = whether the bf16 ones run.
const Bf16AttentionChoice& bf16_attention_choice(int64_t head_dim, int64_t group);

}  // namespace ponder
