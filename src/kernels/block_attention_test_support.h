// Helpers of the block order's kernel tests (block_attention_test.cc,
// block_attention_i8_test.cc): random inputs, row pointers, softmax states compared bit for bit.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/block_attention.h"
#include "quant/half.h"

namespace ponder::block_attention_test {

// n_q query vectors of hd values drawn from g.
inline std::vector<float> random_queries(int n_q, int64_t hd, std::normal_distribution<float>& g,
                                         std::mt19937& rng) {
  std::vector<float> q(static_cast<size_t>(n_q * hd));
  for (float& e : q) e = g(rng);
  return q;
}

// The query vectors rounded to bf16, each padded to hdp32 (round_to_bf16).
inline std::vector<uint16_t> bf16_queries(const std::vector<float>& q, int n_q, int64_t hd,
                                          int64_t hdp32) {
  std::vector<uint16_t> qb(static_cast<size_t>(n_q * hdp32));
  for (int i = 0; i < n_q; ++i) round_to_bf16(q.data() + i * hd, hd, hdp32, qb.data() + i * hdp32);
  return qb;
}

// The K and V rows of positions [b0, b0 + nb) as a block's row pointers.
template <class T>
void block_rows(const std::vector<std::vector<T>>& k, const std::vector<std::vector<T>>& v, int b0,
                int nb, const T* kr[16], const T* vr[16]) {
  for (int p = 0; p < nb; ++p) {
    kr[p] = k[static_cast<size_t>(b0 + p)].data();
    vr[p] = v[static_cast<size_t>(b0 + p)].data();
  }
}

inline std::vector<const BlockAttentionKernels*> all_kernels() {
  std::vector<const BlockAttentionKernels*> k = {&block_attention_kernels_scalar()};
  if (block_attention_kernels_avx2() != nullptr) k.push_back(block_attention_kernels_avx2());
  if (block_attention_kernels_avxvnni() != nullptr) k.push_back(block_attention_kernels_avxvnni());
  if (block_attention_kernels_avx512() != nullptr) k.push_back(block_attention_kernels_avx512());
  return k;
}

// n_q fresh softmax states over their own accumulators [n_q][hd].
struct GroupStates {
  std::vector<float> acc;
  std::vector<SoftmaxState> st;
  GroupStates(int n_q, int64_t hd)
      : acc(static_cast<size_t>(n_q * hd), 0.0f), st(static_cast<size_t>(n_q)) {
    for (int i = 0; i < n_q; ++i)
      st[static_cast<size_t>(i)] = {-INFINITY, 0.0f, acc.data() + i * hd};
  }
};

// got's states carry want's bits.
inline void expect_same_states(const GroupStates& got, const GroupStates& want, int64_t hd,
                               const std::string& what) {
  for (size_t i = 0; i < want.st.size(); ++i) {
    ASSERT_EQ(std::memcmp(&got.st[i].m, &want.st[i].m, sizeof(float)), 0)
        << what << ", query " << i;
    ASSERT_EQ(std::memcmp(&got.st[i].l, &want.st[i].l, sizeof(float)), 0)
        << what << ", query " << i;
    ASSERT_EQ(std::memcmp(got.st[i].acc, want.st[i].acc, static_cast<size_t>(hd) * sizeof(float)),
              0)
        << what << ", query " << i;
  }
}

// n Q8_0 rows of hd values (34-byte blocks: f16 scale in [-0.1, 0.1], 32 random int8).
inline std::vector<std::vector<uint8_t>> random_q8_0_rows(int n, int64_t hd, std::mt19937& rng) {
  std::vector<std::vector<uint8_t>> rows(static_cast<size_t>(n),
                                         std::vector<uint8_t>(static_cast<size_t>(hd / 32 * 34)));
  for (auto& row : rows) {
    for (int64_t b = 0; b < hd / 32; ++b) {
      const uint16_t d = fp32_to_fp16(std::uniform_real_distribution<float>(-0.1f, 0.1f)(rng));
      std::memcpy(&row[static_cast<size_t>(b * 34)], &d, 2);
      for (int i = 0; i < 32; ++i)
        row[static_cast<size_t>(b * 34 + 2 + i)] = static_cast<uint8_t>(rng());
    }
  }
  return rows;
}

// The n rows of k and v from `from` where they all exist (the kernels prefetch them: no bit may
// change), else nullptr.
template <class T>
const ponder::BlockRows* rows_ahead(const std::vector<std::vector<T>>& k,
                                    const std::vector<std::vector<T>>& v, int from, int n,
                                    ponder::BlockRows& out) {
  if (from + n > static_cast<int>(k.size())) return nullptr;
  for (int p = 0; p < n; ++p) {
    out.k[p] = reinterpret_cast<const uint8_t*>(k[static_cast<size_t>(from + p)].data());
    out.v[p] = reinterpret_cast<const uint8_t*>(v[static_cast<size_t>(from + p)].data());
  }
  out.k_bytes = static_cast<int64_t>(k[0].size() * sizeof(T));
  out.v_bytes = static_cast<int64_t>(v[0].size() * sizeof(T));
  return &out;
}

// The block of rows k, v from b0 as attention meets it: nb rows, the queries seeing `valid` of
// them (the last block `cut` fewer).
template <class T>
struct BlockOf {
  int nb, valid;
  const T* k[16];
  const T* v[16];
  BlockOf(const std::vector<std::vector<T>>& kr, const std::vector<std::vector<T>>& vr, int b0,
          int cut) {
    const int n = static_cast<int>(kr.size());
    nb = std::min(16, n - b0);
    valid = b0 + 16 >= n ? std::max(1, nb - cut) : nb;
    block_rows(kr, vr, b0, nb, k, v);
  }
};

// softmax(s) . V in doubles: out[i] = sum over p of softmax(s)[p] * value(p, i), i < hd.
template <class Value>
std::vector<double> softmax_weighted(std::vector<double> s, int64_t hd, const Value& value) {
  double mx = -INFINITY;
  for (double e : s) mx = std::max(mx, e);
  double sum = 0;
  for (double& e : s) sum += (e = std::exp(e - mx));
  std::vector<double> out(static_cast<size_t>(hd), 0.0);
  for (size_t p = 0; p < s.size(); ++p) {
    for (int64_t i = 0; i < hd; ++i) out[static_cast<size_t>(i)] += s[p] * value(p, i) / sum;
  }
  return out;
}

}  // namespace ponder::block_attention_test
