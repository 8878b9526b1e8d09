// The kernels of the block order of attention (model/attention.h, `--flash-attn`): KV positions in
// blocks of 16, converted once to f32 and shared by every query vector of a tile, each block's 16
// scores computed with the positions in the lanes of one vector (no horizontal reduction per
// position), an online softmax with the probabilities kept in f32, and the V rows added in
// position order. Scalar reference, AVX2 and AVX-512 versions compute the same bits; the order:
//
//   dot(k, q) over d < hdp: lane j (0..15) chains acc_j = fma(k[d], q[d], acc_j) from +0 over
//     d = j, j + 16, j + 32, ...; then r8[j] = acc_j + acc_{j+8}, r4[j] = r8[j] + r8[j+4],
//     r2[j] = r4[j] + r4[j+2], dot = r2[0] + r2[1] (tree16)
//   s[p] = dot(K[p], q) * scale for the block's first `valid` positions
//   m' = max(m, max s); c = exp_nonpositive(m - m') (0 if m = -inf);
//   e[p] = exp_nonpositive(s[p] - m')
//   l = l * c + tree16(e, zeros past valid); acc[i] = acc[i] * c unless c == 1, then
//     acc[i] = fma(e[p], V[p][i], acc[i]) for p = 0 .. valid - 1 in order
//
// The bf16-scores variant (block_attention_kernels().attend_block_bf16_group where AVX512_BF16 runs
// it natively; model/attention.cc uses it for quantized weights, whose activations llama.cpp rounds
// to 8 bits anyway) computes s[p] from bf16 copies of k and q, as vdpbf16ps does, and everything
// after the scores as above:
//   bf16(x): f32 rounded to nearest even on the 16 dropped bits (NaN quiet, subnormals to a zero of
//     their sign); kb and qb are [hdp32] rows (hd rounded up to 32, zeros past hd)
//   dot(kb, qb): lane j (0..15) chains
//     acc_j = vdpbf16ps_lane(acc_j, pair j of chunk c of kb, of qb)
//     from +0 over the chunks c of 32 elements (pair j: elements 32c + 2j, 32c + 2j + 1),
//     then tree16
//
// The bf16-cache variant (K and V stored as bf16 rows, `--cache-type-k/-v bf16`) takes the scores
// of the bf16 variant straight from the K rows, the softmax step as above, and sums V by vdpbf16ps
// over pairs of positions with the weights rounded to bf16 (l keeps their f32 sum):
//   for k = 0 .. ceil(valid / 2) - 1, for each column i: vp = (V[2k][i], V[2k + 1][i]) (zero for
//     the row 2k + 1 = valid); acc[i] = vdpbf16ps_lane(acc[i], vp, (bf16(e[2k]), bf16(e[2k + 1])))
// Its kernels take steps of up to 32 positions (kAttnStepBf16): two blocks in turn, the bits of two
// calls, with the second block's scores and softmax step computed before the first block's V sums,
// and each accumulator loaded and stored once for both. (Session 18: one softmax step over the 32
// positions, a new order, was only a little faster and moved top-1 rows of Q2_K past the exact
// rule.) (Two bf16 parts per weight, ~16 bits, measured no closer to the exact computation on the
// golden files and cost twice the instructions.)
//
// The int8-scores variant (a Q8_0 K cache with `--attn-scores int8`: llama.cpp's route for
// `-ctk q8_0`, judged by the kv-q8_0 rule of ../shared/golden/kv-q8_0/README.md) rounds each query
// vector to Q8_0 (quantize_row: blocks b of 32 values, codes qq, scale dq_b an f16) and takes the
// scores from exact integer sums over the K rows' codes kq and scales dk:
//   isum[p][b] = sum over i < 32 of kq[p][32b + i] * qq[32b + i]
//   acc = +0; for each b in order: acc = fma(f32(isum[p][b]), f32(dk[p][b]) * f32(dq_b), acc)
//   s[p] = acc * scale
// then the softmax step as above. Its kernels take K as convert_block_q8_0_i8 leaves a block
// (K8Block: the codes transposed so that one 64-byte vector holds 4 dimensions of all 16
// positions, each code + 128 as vpdpbusd's unsigned operand; the query's codes are the signed one
// and -128 * sum(qq) of the block starts each sum). With an f16 V cache the f32 V sums as above
// (V as convert_block gives it); with a Q8_0 V cache (codes vq, scales dv) exact integer sums of
// the V codes weighted by int16 weights (vpdpwssd), one per query vector and V block b (32
// columns):
//   u[p] = e[p] * f32(dv[p][b]) (0 for the rows p >= valid, whose e is 0)
//   top = the largest bit pattern of |u[p]| over p < 16 (as uint32)
//   up, down = i16_scale(top): powers of two that put the largest |u| in [2^14, 2^15)
//   w[p] = int16 with saturation of cvtps2dq(u[p] * up) (round to nearest even)
//   isum[i] = sum over p < 16 of w[p] * vq[p][i] for the columns i of block b (exact in int32)
//   acc[i] = fma(f32(isum[i]), down, acc[i])   (after the correction of the softmax step)
// The weights keep 15 bits next to their V block's largest (bf16: 8; one scale for all the V
// blocks of a query moved top-1 rows of Q2_K-p1 past the kv-q8_0 rule), the products and sums
// are exact. The kernels take V as convert_block_q8_0_v16 leaves a block (V16Block: pairs of
// positions' codes side by side as int16, vpdpwssd's operand; v16_index) or read its rows
// directly (decode).
//
// Depends on cpu (ISA choice) and kernels/dot_ggml_order.h (vdpbf16ps_lane).
#pragma once

#include <bit>
#include <cstdint>

namespace ponder {

inline constexpr int kAttnBlock = 16;     // KV positions per block of the block order
inline constexpr int kAttnStepBf16 = 32;  // positions per kernel call of the bf16-cache variant

struct BlockQ8_0;

// A block of Q8_0 K rows for the int8-scores variant (header), hd a multiple of 32:
//   codes[g * 64 + 4p + j] = kq[p][4g + j] + 128 (as a byte; 128 for the rows p >= n), g < hd / 4
//   scales[b * 16 + p] = f32(dk[p][b]) (+0 for the rows p >= n), b < hd / 32
struct K8Block {
  uint8_t* codes;  // [hd / 4][64]
  float* scales;   // [hd / 32][16]
};
struct ConstK8Block {
  const uint8_t* codes;
  const float* scales;
};
// A block of Q8_0 V rows for the int16 V sums (header), hd a multiple of 32: each pair of
// positions (2k, 2k + 1) as int16 pairs in the order of a byte interleave of the rows' 32 codes
// of a V block followed by sign extension to words (v16_index), scales as K8Block's.
//   pairs[v16_index(hd / 32, p, i)] = vq[p][i] (0 for the rows p >= n)
//   scales[b * 16 + p] = f32(dv[p][b]) (+0 for the rows p >= n), b < hd / 32
struct V16Block {
  int16_t* pairs;  // [8][hd / 32][2][16][2]
  float* scales;   // [hd / 32][16]
};
struct ConstV16Block {
  const int16_t* pairs;
  const float* scales;
};
// The int16 of position p (0..15), column i in a V16Block of nb V blocks: pair k = p / 2, block b
// = i / 32, half t (the columns i % 32 in 8..15 and 24..31 are t = 1), word j of its 16 (the
// columns 0..7 and 16..23 of the block in t = 0), p % 2 the low or high int16 of the word.
inline int64_t v16_index(int64_t nb, int p, int64_t i) {
  const int64_t r = i % 32, t = (r / 8) % 2, j = r % 8 + (r >= 16 ? 8 : 0);
  return ((((p / 2) * nb + i / 32) * 2 + t) * 16 + j) * 2 + p % 2;
}

// The powers of two of the int16 weights (header) for the largest |u| bit pattern `top`: with
// E = top's exponent field and Ec = max(E, 15) (a largest |u| below 2^-112 keeps fewer bits),
// up = 2^(141 - Ec), down = 2^(Ec - 141), or NaN when E = 255 (an infinite or NaN weight).
// The SIMD kernels compute it on vectors of `top` with these constants (up's exponent field is
// kI16UpField - Ec, down's Ec - kI16DownBias).
inline constexpr uint32_t kI16MinExponent = 15, kI16UpField = 268, kI16DownBias = 14;
inline constexpr uint32_t kQuietNan = 0x7fc00000u;
struct I16Scale {
  float up, down;
};
inline I16Scale i16_scale(uint32_t top) {
  const uint32_t e = top >> 23, ec = e < kI16MinExponent ? kI16MinExponent : e;
  return {std::bit_cast<float>((kI16UpField - ec) << 23),
          std::bit_cast<float>(e == 255 ? kQuietNan : (ec - kI16DownBias) << 23)};
}

// Query vectors for it: q [n_q][hd / 32] blocks (quantize_row of each vector) and qsum
// [n_q][hd / 32] the sums of each block's 32 codes.
struct QueriesQ8 {
  const BlockQ8_0* q;
  const int32_t* qsum;
};

// exp(x) for x <= 0 (or -inf): ggml's range reduction and degree-5 polynomial (expf_ggml),
// scaled by 2^n exactly; 0 below x < -86 (where the result would approach the subnormals), so
// every ISA's version is one product away from the polynomial, bit for bit.
float exp_nonpositive(float x);

// The online-softmax state of one query vector over some positions.
struct SoftmaxState {
  float m;     // running max of the scores (-inf: no position yet)
  float l;     // sum of exp(s - m)
  float* acc;  // [hdp] sum of exp(s - m) * V
};

// The K and V rows of the next step's positions as stored (k_bytes and v_bytes each): 16 (one
// block) for the kernels of 16 positions, 32 for the bf16-cache kernel's steps. A kernel asks for
// their lines (prefetch into L2) a few at a time while it computes the current step, a hint that
// never changes a bit.
struct BlockRows {
  const uint8_t* k[kAttnStepBf16];
  const uint8_t* v[kAttnStepBf16];
  int64_t k_bytes, v_bytes;
};

struct BlockAttentionKernels {
  // out[p * hdp + i] = f32(rows[p][i]) for p < n, i < hd; zeros for i in [hd, hdp) and for the
  // rows p in [n, 16). hdp is hd rounded up to 16.
  void (*convert_block)(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp, float* out);
  // The same from Q8_0 rows (hd / 32 blocks of 34 bytes: f16 scale d, 32 int8 q; hd a multiple
  // of 32, so hdp = hd): out[p * hdp + i] = f32(d) * q, one rounding, the same in every ISA.
  void (*convert_block_q8_0)(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp,
                             float* out);
  // One query vector q [hdp] (zeros past hd) against a converted block's first `valid` (1..16)
  // positions: k and v [16][hdp]; updates st as the header describes.
  void (*attend_block)(const float* k, const float* v, const float* q, int valid, int64_t hdp,
                       float scale, SoftmaxState& st);
  // o[i] = fma(acc[i], b, o[i] * a) for i < hdp (hdp a multiple of 16): folds one chunk's
  // accumulator into the running one (model/attention.cc).
  void (*fold)(float* o, const float* acc, float a, float b, int64_t hdp);
  // Decode's fused form, nullptr where not built (then convert_block + attend_block): n_q query
  // vectors q [n_q][hdp] that all see a block of f16 rows' first `valid` (1..16) positions, read
  // straight from the rows (no f32 copy); st[i] ends with the bits that convert_block of K and V,
  // then attend_block for query i, give. Needs hd == hdp, a multiple of 64, at most 256.
  // next, when not null, is the following block (as attend_block_bf16kv_group's).
  void (*attend_block_f16_group)(const uint16_t* const* krows, const uint16_t* const* vrows,
                                 int valid, const float* q, int n_q, int64_t hdp, float scale,
                                 SoftmaxState* st, const BlockRows* next) = nullptr;
  // The same straight from Q8_0 rows (hd / 32 blocks of 34 bytes each), K and V both: the bits of
  // convert_block_q8_0 of K and V, then attend_block for query i; hd == hdp, a multiple of 64, at
  // most 256. nullptr where not built.
  void (*attend_block_q8_0_group)(const uint8_t* const* krows, const uint8_t* const* vrows,
                                  int valid, const float* q, int n_q, int64_t hdp, float scale,
                                  SoftmaxState* st, const BlockRows* next) = nullptr;
  // The same for a block already converted to f32 (k and v [16][hdp], hdp a multiple of 16), as
  // attend_block for each of the n_q queries (which all see its first `valid` positions) in turn
  // would leave them, each K and V vector loaded once for several queries (prompts: the query heads
  // of one row). nullptr where not built. next as attend_block_f16_group's.
  void (*attend_block_group)(const float* k, const float* v, int valid, const float* q, int n_q,
                             int64_t hdp, float scale, SoftmaxState* st,
                             const BlockRows* next) = nullptr;

  // The bf16-scores variant (header). kb [16][hdp32] bf16 rows: bf16 of a block's f16 or Q8_0 rows
  // for p < n, zeros past hd and for the rows p in [n, 16).
  void (*convert_block_bf16)(const uint16_t* const* rows, int n, int64_t hd, int64_t hdp32,
                             uint16_t* kb) = nullptr;
  void (*convert_block_q8_0_bf16)(const uint8_t* const* rows, int n, int64_t hd, int64_t hdp32,
                                  uint16_t* kb) = nullptr;
  // One query vector qb [hdp32] (bf16) against a block: scores from kb, then attend_block's steps
  // with v [16][hdp] f32. Always built (the scalar reference where nothing faster is).
  void (*attend_block_bf16)(const uint16_t* kb, const float* v, const uint16_t* qb, int valid,
                            int64_t hdp, int64_t hdp32, float scale, SoftmaxState& st) = nullptr;
  // n_q query vectors qb [n_q][hdp32] that see the same `valid` positions, as attend_block_bf16 for
  // each in turn would leave them; V from an f32 block [16][hdp] or (f16 form, hd == hdp a multiple
  // of 64) straight from the f16 rows. nullptr where not built (no AVX512_BF16).
  void (*attend_block_bf16_group)(const uint16_t* const* krows, const float* v, int valid,
                                  const uint16_t* qb, int n_q, int64_t hdp, int64_t hdp32,
                                  float scale, SoftmaxState* st) = nullptr;
  // The bf16-cache variant (header) for one query vector qb [hdp32]: krows and vrows a step's (up
  // to 32) bf16 rows of hd values (the first `valid`, 1..32, are read: two blocks in turn). Always
  // built (the scalar reference).
  void (*attend_block_bf16kv)(const uint16_t* const* krows, const uint16_t* const* vrows, int valid,
                              const uint16_t* qb, int64_t hd, int64_t hdp32, float scale,
                              SoftmaxState& st) = nullptr;
  // The same for n_q query vectors qb [n_q][hd] that see the same `valid` (1..32) positions, each
  // K and V vector loaded once for all of them; hd a multiple of 32, at most 256. next, when not
  // null, is the following step (32 full K and V rows): its lines are prefetched a few at a time
  // while this step computes (a hint, the bits never depend on it). nullptr where not built.
  void (*attend_block_bf16kv_group)(const uint16_t* const* krows, const uint16_t* const* vrows,
                                    int valid, const uint16_t* qb, int n_q, int64_t hd, float scale,
                                    SoftmaxState* st, const BlockRows* next) = nullptr;
  void (*attend_block_bf16_f16_group)(const uint16_t* const* krows, const uint16_t* const* vrows,
                                      int valid, const uint16_t* qb, int n_q, int64_t hdp,
                                      int64_t hdp32, float scale, SoftmaxState* st) = nullptr;

  // The int8-scores variant (header). K rows of a block to K8Block (always built).
  void (*convert_block_q8_0_i8)(const uint8_t* const* rows, int n, int64_t hd,
                                K8Block out) = nullptr;
  // n_q query vectors (hd / 32 blocks each) against the block's first `valid` (1..16) positions:
  // the scores from k, then attend_block's steps with v [16][hd] f32 (always built: the scalar
  // reference where nothing faster is).
  void (*attend_block_i8)(ConstK8Block k, const float* v, int valid, QueriesQ8 q, int n_q,
                          int64_t hd, float scale, SoftmaxState* st) = nullptr;
  // The same with a Q8_0 V cache: V from a V16Block by the int16 V sums (always built).
  void (*convert_block_q8_0_v16)(const uint8_t* const* rows, int n, int64_t hd,
                                 V16Block out) = nullptr;
  void (*attend_block_i8_v16)(ConstK8Block k, ConstV16Block v, int valid, QueriesQ8 q, int n_q,
                              int64_t hd, float scale, SoftmaxState* st) = nullptr;
  // Decode's fused form: K converted in the kernel, V read straight from the Q8_0 rows; the bits
  // of convert_block_q8_0_i8, convert_block_q8_0_v16 and attend_block_i8_v16. next as
  // attend_block_f16_group's. nullptr where not built.
  void (*attend_block_q8_0_i8_group)(const uint8_t* const* krows, const uint8_t* const* vrows,
                                     int valid, QueriesQ8 q, int n_q, int64_t hd, float scale,
                                     SoftmaxState* st, const BlockRows* next) = nullptr;

  // Whether a kernel is built and takes head size hd, so callers ask the table rather than know
  // each kernel's limits. The kernels that read f16 or Q8_0 rows directly (and the f16-V form of
  // attend_block_bf16_f16_group) go 64 values at a time and keep a whole row in registers; the
  // bf16-cache one goes 32 at a time. All need hd == hdp besides, which callers know.
  bool f16_group_takes(int64_t hd) const {
    return attend_block_f16_group != nullptr && rows_of_64_take(hd);
  }
  bool q8_0_group_takes(int64_t hd) const {
    return attend_block_q8_0_group != nullptr && rows_of_64_take(hd);
  }
  bool bf16_f16_group_takes(int64_t hd) const {
    return attend_block_bf16_f16_group != nullptr && rows_of_64_take(hd);
  }
  bool bf16kv_group_takes(int64_t hd) const {
    return attend_block_bf16kv_group != nullptr && hd % 32 == 0 && hd <= 256;
  }
  bool q8_0_i8_group_takes(int64_t hd) const {
    return attend_block_q8_0_i8_group != nullptr && rows_of_64_take(hd);
  }
  static bool rows_of_64_take(int64_t hd) { return hd % 64 == 0 && hd <= 256; }
};

// bf16 of the header for n values, zeros for [n, n_pad).
void round_to_bf16(const float* x, int64_t n, int64_t n_pad, uint16_t* out);

// The kernels for active_isa() (PONDER_ISA may force scalar).
const BlockAttentionKernels& block_attention_kernels();
// The scalar reference, and where compiled and supported the AVX2, AVX-VNNI (AVX2's with the
// int8-scores kernels on vpdpbusd) and AVX-512 versions (else nullptr).
const BlockAttentionKernels& block_attention_kernels_scalar();
const BlockAttentionKernels* block_attention_kernels_avx2();
const BlockAttentionKernels* block_attention_kernels_avxvnni();
const BlockAttentionKernels* block_attention_kernels_avx512();

}  // namespace ponder
