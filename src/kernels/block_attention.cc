#include "kernels/block_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <tuple>
#include <type_traits>

#include "cpu/cpu_features.h"
#include "kernels/dot_ggml_order.h"
#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/quantize.h"

namespace ponder {

#if defined(PONDER_X86_KERNELS)
// The x86 kernels (x86/block_attention_avx2.cc, x86/block_attention_avx512.cc), each of the type of
// the table entry it fills.
template <auto kMember>
using KernelFn =
    std::remove_pointer_t<std::remove_reference_t<decltype(BlockAttentionKernels{}.*kMember)>>;
KernelFn<&BlockAttentionKernels::convert_block> convert_block_avx2, convert_block_avx512;
KernelFn<&BlockAttentionKernels::convert_block_q8_0> convert_block_q8_0_avx2,
    convert_block_q8_0_avx512;
KernelFn<&BlockAttentionKernels::fold> fold_avx2, fold_avx512;
KernelFn<&BlockAttentionKernels::attend_block> attend_block_avx2, attend_block_avx512;
KernelFn<&BlockAttentionKernels::attend_block_f16_group> attend_block_f16_group_avx2,
    attend_block_f16_group_avx512;
KernelFn<&BlockAttentionKernels::attend_block_q8_0_group> attend_block_q8_0_group_avx2,
    attend_block_q8_0_group_avx512;
KernelFn<&BlockAttentionKernels::attend_block_group> attend_block_group_avx2,
    attend_block_group_avx512;
KernelFn<&BlockAttentionKernels::convert_block_bf16> convert_block_bf16_avx512bf16;
KernelFn<&BlockAttentionKernels::convert_block_q8_0_bf16> convert_block_q8_0_bf16_avx512bf16;
KernelFn<&BlockAttentionKernels::attend_block_bf16_group> attend_block_bf16_group_avx512bf16;
KernelFn<&BlockAttentionKernels::attend_block_bf16_f16_group>
    attend_block_bf16_f16_group_avx512bf16;
KernelFn<&BlockAttentionKernels::attend_block_bf16kv_group> attend_block_bf16kv_group_avx512bf16;
KernelFn<&BlockAttentionKernels::convert_block_q8_0_i8> convert_block_q8_0_i8_avx512;
KernelFn<&BlockAttentionKernels::attend_block_i8> attend_block_i8_avx512vnni;
KernelFn<&BlockAttentionKernels::attend_block_q8_0_i8_group> attend_block_q8_0_i8_group_avx512vnni;
KernelFn<&BlockAttentionKernels::convert_block_q8_0_v16> convert_block_q8_0_v16_avx512;
KernelFn<&BlockAttentionKernels::attend_block_i8_v16> attend_block_i8_v16_avx512vnni;
// x86/block_attention_avx2.cc compiled with -mavxvnni: the int8-scores kernels.
KernelFn<&BlockAttentionKernels::convert_block_q8_0_i8> convert_block_q8_0_i8_avxvnni;
KernelFn<&BlockAttentionKernels::attend_block_i8> attend_block_i8_avxvnni;
KernelFn<&BlockAttentionKernels::attend_block_q8_0_i8_group> attend_block_q8_0_i8_group_avxvnni;
KernelFn<&BlockAttentionKernels::convert_block_q8_0_v16> convert_block_q8_0_v16_avxvnni;
KernelFn<&BlockAttentionKernels::attend_block_i8_v16> attend_block_i8_v16_avxvnni;
#endif

namespace {
#include "kernels/ggml_exp.h"
}  // namespace

float exp_nonpositive(float x) {
  if (!(x >= -86.0f)) return 0.0f;
  float n;
  const float j = exp_ggml_poly<ScalarOps>(x, &n);
  // n in [-125, 0]: 2^n is a normal float and j * 2^n is exact.
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return j * scale;
}

namespace {

float tree16(const float* a) {
  float r8[8], r4[4];
  for (int j = 0; j < 8; ++j) r8[j] = a[j] + a[j + 8];
  for (int j = 0; j < 4; ++j) r4[j] = r8[j] + r8[j + 4];
  return (r4[0] + r4[2]) + (r4[1] + r4[3]);
}

void convert_block(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp, float* out) {
  std::fill(out, out + kAttnBlock * hdp, 0.0f);
  for (int p = 0; p < n; ++p) {
    for (int64_t i = 0; i < hd; ++i) out[p * hdp + i] = fp16_to_fp32(rows[p][i]);
  }
}

void convert_block_q8_0(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp, float* out) {
  std::fill(out, out + kAttnBlock * hdp, 0.0f);
  for (int p = 0; p < n; ++p) dequantize_row(GgmlType::Q8_0, rows[p], out + p * hdp, hd);
}

// The online-softmax step for the scores s[0, valid) (already scaled): m and l updated, e[16] the
// weights (zeros past valid), acc[0, hdp) times the correction unless it is 1.
void softmax_step(const float* s, int valid, int64_t hdp, SoftmaxState& st, float* e) {
  const float m_new = std::max(st.m, *std::max_element(s, s + valid));
  const float c = st.m == -INFINITY ? 0.0f : exp_nonpositive(st.m - m_new);
  std::fill(e, e + kAttnBlock, 0.0f);
  for (int p = 0; p < valid; ++p) e[p] = exp_nonpositive(s[p] - m_new);
  st.l = st.l * c + tree16(e);
  st.m = m_new;
  if (c != 1.0f) {
    for (int64_t i = 0; i < hdp; ++i) st.acc[i] *= c;
  }
}

// The steps after the scores: online softmax and the V sums.
void softmax_values(const float* s, const float* v, int valid, int64_t hdp, SoftmaxState& st) {
  float e[kAttnBlock];
  softmax_step(s, valid, hdp, st, e);
  for (int p = 0; p < valid; ++p) {
    for (int64_t i = 0; i < hdp; ++i) st.acc[i] = std::fma(e[p], v[p * hdp + i], st.acc[i]);
  }
}

void attend_block(const float* k, const float* v, const float* q, int valid, int64_t hdp,
                  float scale, SoftmaxState& st) {
  float s[kAttnBlock] = {};
  for (int p = 0; p < valid; ++p) {
    float lanes[16] = {};
    for (int64_t d = 0; d < hdp; ++d) lanes[d % 16] = std::fma(k[p * hdp + d], q[d], lanes[d % 16]);
    s[p] = tree16(lanes) * scale;
  }
  softmax_values(s, v, valid, hdp, st);
}

uint16_t bf16_of(float x) {
  if (std::fpclassify(x) == FP_SUBNORMAL) x = std::signbit(x) ? -0.0f : 0.0f;
  return fp32_to_bf16(x);
}

void convert_block_bf16(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp32,
                        uint16_t* kb) {
  std::fill(kb, kb + kAttnBlock * hdp32, uint16_t{0});
  for (int p = 0; p < n; ++p) {
    for (int64_t i = 0; i < hd; ++i) kb[p * hdp32 + i] = bf16_of(fp16_to_fp32(rows[p][i]));
  }
}

void convert_block_q8_0_bf16(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp32,
                             uint16_t* kb) {
  std::fill(kb, kb + kAttnBlock * hdp32, uint16_t{0});
  float group[kQK];
  for (int p = 0; p < n; ++p) {
    for (int64_t b = 0; b < hd / kQK; ++b) {
      dequantize_row(GgmlType::Q8_0, rows[p] + b * sizeof(BlockQ8_0), group, kQK);
      for (int64_t i = 0; i < kQK; ++i) kb[p * hdp32 + b * kQK + i] = bf16_of(group[i]);
    }
  }
}

void attend_block_bf16(const uint16_t* kb, const float* v, const uint16_t* qb, int valid,
                       int64_t hdp, int64_t hdp32, float scale, SoftmaxState& st) {
  const auto pair = [](const uint16_t* e) {
    return static_cast<uint32_t>(e[0]) | static_cast<uint32_t>(e[1]) << 16;
  };
  float s[kAttnBlock] = {};
  for (int p = 0; p < valid; ++p) {
    float lanes[16] = {};
    for (int64_t c = 0; c < hdp32; c += 32) {
      for (int j = 0; j < 16; ++j) {
        lanes[j] = vdpbf16ps_lane(lanes[j], pair(kb + p * hdp32 + c + 2 * j), pair(qb + c + 2 * j));
      }
    }
    s[p] = tree16(lanes) * scale;
  }
  softmax_values(s, v, valid, hdp, st);
}

// The pair (x[i], x[i + 1]) of a row of n values as vdpbf16ps takes it (x[i] low), zeros past n.
uint32_t bf16_pair(const uint16_t* x, int64_t i, int64_t n) {
  const uint32_t a = i < n ? x[i] : 0, b = i + 1 < n ? x[i + 1] : 0;
  return a | b << 16;
}

// One block (valid 1..16) of the bf16-cache variant.
void attend_one_block_bf16kv(const uint16_t* const* krows, const uint16_t* const* vrows, int valid,
                             const uint16_t* qb, int64_t hd, int64_t hdp32, float scale,
                             SoftmaxState& st) {
  float s[kAttnBlock] = {};
  for (int p = 0; p < valid; ++p) {
    float lanes[16] = {};
    for (int64_t c = 0; c < hdp32; c += 32) {
      for (int j = 0; j < 16; ++j) {
        lanes[j] = vdpbf16ps_lane(lanes[j], bf16_pair(krows[p], c + 2 * j, hd),
                                  bf16_pair(qb, c + 2 * j, hdp32));
      }
    }
    s[p] = tree16(lanes) * scale;
  }
  float e[kAttnBlock];
  softmax_step(s, valid, (hd + 15) / 16 * 16, st, e);
  for (int k = 0; 2 * k < valid; ++k) {
    const uint32_t w = bf16_of(e[2 * k]) | static_cast<uint32_t>(bf16_of(e[2 * k + 1]))
                                               << 16;  // e is 0 past valid
    for (int64_t i = 0; i < hd; ++i) {
      const uint32_t vp =
          static_cast<uint32_t>(vrows[2 * k][i]) |
          (2 * k + 1 < valid ? static_cast<uint32_t>(vrows[2 * k + 1][i]) << 16 : 0u);
      st.acc[i] = vdpbf16ps_lane(st.acc[i], vp, w);
    }
  }
}

// A step of up to 32 positions: its blocks in turn.
void attend_block_bf16kv(const uint16_t* const* krows, const uint16_t* const* vrows, int valid,
                         const uint16_t* qb, int64_t hd, int64_t hdp32, float scale,
                         SoftmaxState& st) {
  attend_one_block_bf16kv(krows, vrows, std::min(valid, kAttnBlock), qb, hd, hdp32, scale, st);
  if (valid > kAttnBlock) {
    attend_one_block_bf16kv(krows + kAttnBlock, vrows + kAttnBlock, valid - kAttnBlock, qb, hd,
                            hdp32, scale, st);
  }
}

void convert_block_q8_0_i8(const uint8_t* const* rows, int n, int64_t hd, K8Block out) {
  std::fill(out.codes, out.codes + hd * kAttnBlock, uint8_t{128});
  std::fill(out.scales, out.scales + hd / kQK * kAttnBlock, 0.0f);
  for (int p = 0; p < n; ++p) {
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(rows[p]);
    for (int64_t i = 0; i < hd; ++i) {
      out.codes[i / 4 * 64 + 4 * p + i % 4] =
          static_cast<uint8_t>(blocks[i / kQK].qs[i % kQK] + 128);
    }
    for (int64_t b = 0; b < hd / kQK; ++b)
      out.scales[b * kAttnBlock + p] = fp16_to_fp32(blocks[b].d);
  }
}

// The int8 scores s[0, valid) of one query vector's Q8_0 blocks qh (header).
void i8_scores(ConstK8Block k, const BlockQ8_0* qh, int valid, int64_t hd, float scale, float* s) {
  const int64_t nb = hd / kQK;
  for (int p = 0; p < valid; ++p) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; ++b) {
      int32_t isum = 0;
      for (int64_t i = b * kQK; i < (b + 1) * kQK; ++i)
        isum += (k.codes[i / 4 * 64 + 4 * p + i % 4] - 128) * qh[b].qs[i % kQK];
      const float d = k.scales[b * kAttnBlock + p] * fp16_to_fp32(qh[b].d);
      acc = std::fma(static_cast<float>(isum), d, acc);
    }
    s[p] = acc * scale;
  }
}

void attend_block_i8(ConstK8Block k, const float* v, int valid, QueriesQ8 q, int n_q, int64_t hd,
                     float scale, SoftmaxState* st) {
  for (int h = 0; h < n_q; ++h) {
    float s[kAttnBlock] = {};
    i8_scores(k, q.q + h * (hd / kQK), valid, hd, scale, s);
    softmax_values(s, v, valid, hd, st[h]);
  }
}

void convert_block_q8_0_v16(const uint8_t* const* rows, int n, int64_t hd, V16Block out) {
  const int64_t nb = hd / kQK;
  std::fill(out.pairs, out.pairs + kAttnBlock * hd, int16_t{0});
  std::fill(out.scales, out.scales + nb * kAttnBlock, 0.0f);
  for (int p = 0; p < n; ++p) {
    const auto* blocks = reinterpret_cast<const BlockQ8_0*>(rows[p]);
    for (int64_t i = 0; i < hd; ++i) out.pairs[v16_index(nb, p, i)] = blocks[i / kQK].qs[i % kQK];
    for (int64_t b = 0; b < nb; ++b) out.scales[b * kAttnBlock + p] = fp16_to_fp32(blocks[b].d);
  }
}

// cvtps2dq with the default rounding (to nearest even), then saturated to int16 as vpmovsdw.
int32_t int16_of(float x) {
  const int32_t i = x >= -2147483648.0f && x < 2147483648.0f
                        ? static_cast<int32_t>(std::nearbyint(x))
                        : INT32_MIN;
  return std::clamp(i, -32768, 32767);
}

// The int16 V sums (header) of one query vector's weights e[16] into acc [hd].
void add_values_i16(ConstV16Block v, const float* e, int64_t hd, float* acc) {
  const int64_t nb = hd / kQK;
  for (int64_t b = 0; b < nb; ++b) {
    float u[kAttnBlock];
    uint32_t top = 0;
    for (int p = 0; p < kAttnBlock; ++p) {
      u[p] = e[p] * v.scales[b * kAttnBlock + p];
      top = std::max(top, std::bit_cast<uint32_t>(u[p]) & 0x7fffffffu);
    }
    const I16Scale s = i16_scale(top);
    int32_t w[kAttnBlock];
    for (int p = 0; p < kAttnBlock; ++p) w[p] = int16_of(u[p] * s.up);
    for (int64_t i = b * kQK; i < (b + 1) * kQK; ++i) {
      int32_t isum = 0;
      for (int p = 0; p < kAttnBlock; ++p) isum += w[p] * v.pairs[v16_index(nb, p, i)];
      acc[i] = std::fma(static_cast<float>(isum), s.down, acc[i]);
    }
  }
}

void attend_block_i8_v16(ConstK8Block k, ConstV16Block v, int valid, QueriesQ8 q, int n_q,
                         int64_t hd, float scale, SoftmaxState* st) {
  for (int h = 0; h < n_q; ++h) {
    float s[kAttnBlock] = {}, e[kAttnBlock];
    i8_scores(k, q.q + h * (hd / kQK), valid, hd, scale, s);
    softmax_step(s, valid, hd, st[h], e);
    add_values_i16(v, e, hd, st[h].acc);
  }
}

void fold(float* o, const float* acc, float a, float b, int64_t hdp) {
  for (int64_t i = 0; i < hdp; ++i) o[i] = std::fma(acc[i], b, o[i] * a);
}

}  // namespace

// bf16_of without branches, so the loop vectorizes: decode rounds its query vectors once per
// split-K chunk task (3% of attention at depth 16384 in perf with the branching form).
void round_to_bf16(const float* x, int64_t n, int64_t n_pad, uint16_t* out) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(x[i]);
    const uint32_t f =
        (u & 0x7f800000u) == 0 ? u & 0x80000000u : u;  // subnormals to a zero of their sign
    const uint32_t nan = (f >> 16) | 0x40u, rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;
    out[i] = static_cast<uint16_t>((f & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
  }
  std::fill(out + n, out + n_pad, uint16_t{0});
}

const BlockAttentionKernels& block_attention_kernels_scalar() {
  static const BlockAttentionKernels k{.convert_block = convert_block,
                                       .convert_block_q8_0 = convert_block_q8_0,
                                       .attend_block = attend_block,
                                       .fold = fold,
                                       .convert_block_bf16 = convert_block_bf16,
                                       .convert_block_q8_0_bf16 = convert_block_q8_0_bf16,
                                       .attend_block_bf16 = attend_block_bf16,
                                       .attend_block_bf16kv = attend_block_bf16kv,
                                       .convert_block_q8_0_i8 = convert_block_q8_0_i8,
                                       .attend_block_i8 = attend_block_i8,
                                       .convert_block_q8_0_v16 = convert_block_q8_0_v16,
                                       .attend_block_i8_v16 = attend_block_i8_v16};
  return k;
}

#if defined(PONDER_X86_KERNELS)
namespace {

// The kernels every table has: the scalar reference's where no faster one is built.
constexpr auto kAlwaysBuilt = std::make_tuple(
    &BlockAttentionKernels::convert_block_bf16, &BlockAttentionKernels::convert_block_q8_0_bf16,
    &BlockAttentionKernels::attend_block_bf16, &BlockAttentionKernels::attend_block_bf16kv,
    &BlockAttentionKernels::convert_block_q8_0_i8, &BlockAttentionKernels::attend_block_i8,
    &BlockAttentionKernels::convert_block_q8_0_v16, &BlockAttentionKernels::attend_block_i8_v16);

BlockAttentionKernels with_scalar_rest(BlockAttentionKernels t) {
  const BlockAttentionKernels& s = block_attention_kernels_scalar();
  std::apply([&](auto... m) { ((t.*m = t.*m != nullptr ? t.*m : s.*m), ...); }, kAlwaysBuilt);
  return t;
}

}  // namespace
#endif

const BlockAttentionKernels* block_attention_kernels_avx2() {
#if defined(PONDER_X86_KERNELS)
  static const BlockAttentionKernels k = with_scalar_rest(
      {convert_block_avx2, convert_block_q8_0_avx2, attend_block_avx2, fold_avx2,
       attend_block_f16_group_avx2, attend_block_q8_0_group_avx2, attend_block_group_avx2});
  if (isa_supported(Isa::kAvx2)) return &k;
#endif
  return nullptr;
}

const BlockAttentionKernels* block_attention_kernels_avxvnni() {
#if defined(PONDER_X86_KERNELS)
  if (block_attention_kernels_avx2() == nullptr || !isa_supported(Isa::kAvxVnni)) return nullptr;
  static const BlockAttentionKernels k = [] {
    BlockAttentionKernels t = *block_attention_kernels_avx2();
    t.convert_block_q8_0_i8 = convert_block_q8_0_i8_avxvnni;
    t.attend_block_i8 = attend_block_i8_avxvnni;
    t.attend_block_q8_0_i8_group = attend_block_q8_0_i8_group_avxvnni;
    t.convert_block_q8_0_v16 = convert_block_q8_0_v16_avxvnni;
    t.attend_block_i8_v16 = attend_block_i8_v16_avxvnni;
    return t;
  }();
  return &k;
#else
  return nullptr;
#endif
}

const BlockAttentionKernels* block_attention_kernels_avx512() {
#if defined(PONDER_X86_KERNELS)
  static const BlockAttentionKernels k = [] {
    BlockAttentionKernels t = with_scalar_rest(
        {convert_block_avx512, convert_block_q8_0_avx512, attend_block_avx512, fold_avx512,
         attend_block_f16_group_avx512, attend_block_q8_0_group_avx512, attend_block_group_avx512});
    if (cpu_features().avx512vnni) {
      t.convert_block_q8_0_i8 = convert_block_q8_0_i8_avx512;
      t.attend_block_i8 = attend_block_i8_avx512vnni;
      t.attend_block_q8_0_i8_group = attend_block_q8_0_i8_group_avx512vnni;
      t.convert_block_q8_0_v16 = convert_block_q8_0_v16_avx512;
      t.attend_block_i8_v16 = attend_block_i8_v16_avx512vnni;
    }
    if (cpu_features().avx512bf16) {
      t.convert_block_bf16 = convert_block_bf16_avx512bf16;
      t.convert_block_q8_0_bf16 = convert_block_q8_0_bf16_avx512bf16;
      t.attend_block_bf16_group = attend_block_bf16_group_avx512bf16;
      t.attend_block_bf16_f16_group = attend_block_bf16_f16_group_avx512bf16;
      t.attend_block_bf16kv_group = attend_block_bf16kv_group_avx512bf16;
    }
    return t;
  }();
  if (isa_supported(Isa::kAvx512)) return &k;
#endif
  return nullptr;
}

const BlockAttentionKernels& block_attention_kernels() {
  static const BlockAttentionKernels* chosen = [] {
    const Isa isa = active_isa();
    if (isa == Isa::kAvx512 && block_attention_kernels_avx512() != nullptr) {
      return block_attention_kernels_avx512();
    }
    if (isa == Isa::kAvxVnni && block_attention_kernels_avxvnni() != nullptr) {
      return block_attention_kernels_avxvnni();
    }
    if (isa_runs_avx2(isa) && block_attention_kernels_avx2() != nullptr) {
      return block_attention_kernels_avx2();
    }
    return &block_attention_kernels_scalar();
  }();
  return *chosen;
}

}  // namespace ponder
