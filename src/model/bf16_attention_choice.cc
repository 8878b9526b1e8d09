#include "model/bf16_attention_choice.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string_view>
#include <vector>

#include "base/timer.h"
#include "cpu/cpu_features.h"
#include "kernels/block_attention.h"
#include "quant/half.h"

namespace ponder {
namespace {

constexpr int kPositions = 512;  // one split-K chunk (model/attention.h)
constexpr int kPasses = 4;       // chunks a timed pass
constexpr int kRounds = 5;

// The two decode kernels over kPositions of random K and V (f16 and bf16 bits of the same
// values), timed in alternation.
Bf16AttentionTiming measure(int64_t hd, int64_t group, const BlockAttentionKernels& kern) {
  const int n_q = static_cast<int>(std::min<int64_t>(group, 6));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> k16(static_cast<size_t>(kPositions * hd)), v16(k16.size()), kb(k16.size()),
      vb(k16.size());
  for (size_t i = 0; i < k16.size(); ++i) {
    const float a = u(rng), b = u(rng);
    k16[i] = fp32_to_fp16(a);
    v16[i] = fp32_to_fp16(b);
    kb[i] = fp32_to_bf16(a);
    vb[i] = fp32_to_bf16(b);
  }
  std::vector<float> q(static_cast<size_t>(n_q * hd)), acc(q.size());
  for (float& x : q) x = u(rng);
  std::vector<uint16_t> qb(q.size());
  round_to_bf16(q.data(), static_cast<int64_t>(q.size()), static_cast<int64_t>(q.size()),
                qb.data());
  std::vector<SoftmaxState> st(static_cast<size_t>(n_q));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  auto pass = [&](bool bf16) {
    const std::vector<uint16_t>& k = bf16 ? kb : k16;
    const std::vector<uint16_t>& v = bf16 ? vb : v16;
    const int step = bf16 ? kAttnStepBf16 : kAttnBlock;
    Timer t;
    for (int r = 0; r < kPasses; ++r) {
      for (int h = 0; h < n_q; ++h)
        st[static_cast<size_t>(h)] = {-INFINITY, 0.0f, acc.data() + h * hd};
      const uint16_t* kr[kAttnStepBf16];
      const uint16_t* vr[kAttnStepBf16];
      for (int p0 = 0; p0 < kPositions; p0 += step) {
        for (int p = 0; p < step; ++p) {
          kr[p] = k.data() + (p0 + p) * hd;
          vr[p] = v.data() + (p0 + p) * hd;
        }
        if (bf16) {
          kern.attend_block_bf16kv_group(kr, vr, step, qb.data(), n_q, hd, scale, st.data(),
                                         nullptr);
        } else {
          kern.attend_block_f16_group(kr, vr, step, q.data(), n_q, hd, scale, st.data(), nullptr);
        }
      }
    }
    return t.seconds() * 1e9 / kPasses;
  };
  pass(true);  // warm-up: the rows into L2, the kernels' first touch
  pass(false);
  Bf16AttentionTiming t{1e30, 1e30};
  for (int r = 0; r < kRounds; ++r) {
    t.ns_bf16 = std::min(t.ns_bf16, pass(true));
    t.ns_f16 = std::min(t.ns_f16, pass(false));
  }
  return t;
}

}  // namespace

Bf16AttentionChoice bf16_attention_choice(int64_t head_dim) {
  const BlockAttentionKernels& kern = block_attention_kernels();
  const bool native = kern.bf16kv_group_takes(head_dim) && kern.attend_block_bf16_group != nullptr;
  if (const char* env = std::getenv("PONDER_BF16_ATTN")) {
    return {native && std::string_view(env) != "off", "PONDER_BF16_ATTN"};
  }
  if (!native) return {false, "no native bf16 attention kernels here"};
  if (cpu_features().vendor == "AuthenticAMD") return {true, "AMD with AVX512_BF16"};
  return {false, "AVX512_BF16 on a CPU other than AMD's (vdpbf16ps slower than FMAs on Intel)"};
}

Bf16AttentionTiming time_bf16_attention(int64_t head_dim, int64_t group) {
  const BlockAttentionKernels& kern = block_attention_kernels();
  if (!kern.bf16kv_group_takes(head_dim) || !kern.f16_group_takes(head_dim)) return {};
  return measure(head_dim, group, kern);
}

}  // namespace ponder
