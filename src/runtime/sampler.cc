#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/check.h"

namespace ponder {

namespace {

// A function object (not a function pointer) so that the sorts inline the comparison.
struct ByLogitDesc {
  bool operator()(const TokenCandidate& a, const TokenCandidate& b) const {
    // Ties broken by id so that the order, and so the draw, never depends on the sort algorithm.
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  }
};
constexpr ByLogitDesc by_logit_desc;

}  // namespace

Status validate_sampler_params(const SamplerParams& params, int32_t n_vocab) {
  if (std::isnan(params.temperature))
    return Status::error("temperature: expected a number, got NaN");
  if (!(params.top_p > 0.0f)) return Status::errorf("top_p: expected > 0, got {}", params.top_p);
  if (!(params.min_p <= 1.0f)) return Status::errorf("min_p: expected <= 1, got {}", params.min_p);
  if (!(params.repeat_penalty > 0.0f)) {
    return Status::errorf("repeat_penalty: expected > 0, got {}", params.repeat_penalty);
  }
  if (std::isnan(params.presence_penalty) || std::isnan(params.frequency_penalty)) {
    return Status::error("presence/frequency penalty: expected a number, got NaN");
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n_vocab) {
      return Status::errorf("logit_bias: token id {} outside the vocabulary [0, {})", id, n_vocab);
    }
    if (std::isnan(bias)) return Status::errorf("logit_bias: token {}: bias is NaN", id);
  }
  return Status::ok();
}

Sampler::Sampler(int32_t n_vocab, SamplerParams params)
    : n_vocab_(n_vocab), params_(std::move(params)), rng_(params_.seed) {
  PONDER_CHECK(n_vocab > 0);
  PONDER_CHECK(validate_sampler_params(params_, n_vocab).is_ok());
  cand_.resize(static_cast<size_t>(n_vocab));
  if (params_.penalty_last_n > 0) {
    window_.assign(static_cast<size_t>(params_.penalty_last_n), 0);
    count_.assign(static_cast<size_t>(n_vocab), 0);
    seen_.assign(static_cast<size_t>(n_vocab), 0);
  }
}

void Sampler::reset(uint64_t seed) {
  rng_.seed(seed);
  for (int32_t i = 0; i < window_size_; ++i)
    count_[static_cast<size_t>(window_[static_cast<size_t>(i)])] = 0;
  window_size_ = 0;
  window_head_ = 0;
}

void Sampler::accept(int32_t token) {
  PONDER_CHECK(token >= 0 && token < n_vocab_);
  const int32_t cap = static_cast<int32_t>(window_.size());
  if (cap == 0) return;
  if (window_size_ == cap) {
    --count_[static_cast<size_t>(window_[static_cast<size_t>(window_head_)])];  // evict the oldest
  } else {
    ++window_size_;
  }
  window_[static_cast<size_t>(window_head_)] = token;
  ++count_[static_cast<size_t>(token)];
  window_head_ = (window_head_ + 1) % cap;
}

void Sampler::apply_penalties() {
  const float rep = params_.repeat_penalty;
  const float presence = params_.presence_penalty;
  const float freq = params_.frequency_penalty;
  if (window_size_ == 0 || (rep == 1.0f && presence == 0.0f && freq == 0.0f)) return;
  // llama.cpp's rule, once per distinct token of the window: the repetition penalty pushes the
  // logit towards "less likely" whatever its sign, then the OpenAI-style penalties subtract.
  ++stamp_;
  if (stamp_ == 0) {  // wrapped: clear the stamps so none matches by accident
    std::fill(seen_.begin(), seen_.end(), 0u);
    stamp_ = 1;
  }
  for (int32_t i = 0; i < window_size_; ++i) {
    const int32_t id = window_[static_cast<size_t>(i)];
    if (seen_[static_cast<size_t>(id)] == stamp_) continue;
    seen_[static_cast<size_t>(id)] = stamp_;
    const int32_t count = count_[static_cast<size_t>(id)];
    float& logit = cand_[static_cast<size_t>(id)].logit;  // cand_ is still indexed by id
    logit = logit > 0.0f ? logit / rep : logit * rep;
    logit -= static_cast<float>(count) * freq + (count > 0 ? presence : 0.0f);
  }
}

void Sampler::sort_prefix(int32_t m) {
  m = std::min(m, n_cand_);
  if (m <= n_sorted_) return;
  // Everything past n_sorted_ is <= the sorted prefix, so extending the prefix only sorts the rest.
  std::partial_sort(cand_.begin() + n_sorted_, cand_.begin() + m, cand_.begin() + n_cand_,
                    by_logit_desc);
  n_sorted_ = m;
}

void Sampler::apply_top_k(int32_t k) {
  if (k <= 0 || k >= n_cand_) return;
  sort_prefix(k);
  n_cand_ = k;
}

void Sampler::apply_top_p(float p, float min_p) {
  if (p >= 1.0f || n_cand_ <= 1) return;
  // The smallest most-likely set whose probability reaches p. Sorting all live candidates (152k
  // without top-k) would cost milliseconds per token, so: bucket the candidates by logit, find
  // the bucket where the cumulative mass crosses p, and sort only the candidates down to it.
  float max_logit = -std::numeric_limits<float>::infinity();
  float min_logit = std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_cand_; ++i) {
    const float l = cand_[static_cast<size_t>(i)].logit;
    max_logit = std::max(max_logit, l);
    min_logit = std::min(min_logit, l);
  }
  if (max_logit == -std::numeric_limits<float>::infinity()) return;
  // Logits more than 40 below the maximum carry < 4e-18 of the mass each: one last bucket.
  const float range = std::min(max_logit - min_logit, 40.0f);
  const float per_unit = range > 0.0f ? static_cast<float>(kTopPBuckets - 1) / range : 0.0f;
  auto bucket_of = [&](float l) {
    const float b = (max_logit - l) * per_unit;  // 0 for the maximum
    return b < static_cast<float>(kTopPBuckets - 1) ? static_cast<int32_t>(b) : kTopPBuckets - 1;
  };
  std::fill(bucket_mass_.begin(), bucket_mass_.end(), 0.0);
  double sum = 0.0;
  for (int32_t i = 0; i < n_cand_; ++i) {
    const float l = cand_[static_cast<size_t>(i)].logit;
    const double w = std::exp(l - max_logit);  // float exp: 2x faster, ample for a cut
    bucket_mass_[static_cast<size_t>(bucket_of(l))] += w;
    sum += w;
  }
  const double target = double{p} * sum;
  int32_t last_bucket = kTopPBuckets - 1;
  double cum = 0.0;
  for (int32_t b = 0; b < kTopPBuckets; ++b) {
    cum += bucket_mass_[static_cast<size_t>(b)];
    if (cum >= target) {
      last_bucket = b;
      break;
    }
  }
  // Keep (in place) the candidates of buckets [0, last_bucket], sort them, then cut exactly.
  // min-p, which comes next, keeps a prefix of the same order (logit >= max + log(min_p), and the
  // maximum survives top-p), so dropping its losers here already gives the same final set while
  // sorting far fewer candidates. The mass target above still counts every candidate.
  const float min_p_logit =
      min_p > 0.0f ? max_logit + std::log(min_p) : -std::numeric_limits<float>::infinity();
  int32_t kept = 0;
  for (int32_t i = 0; i < n_cand_; ++i) {
    const float l = cand_[static_cast<size_t>(i)].logit;
    if (l >= min_p_logit && bucket_of(l) <= last_bucket) {
      cand_[static_cast<size_t>(kept++)] = cand_[static_cast<size_t>(i)];
    }
  }
  std::sort(cand_.begin(), cand_.begin() + kept, by_logit_desc);
  n_cand_ = kept;
  n_sorted_ = kept;
  cum = 0.0;
  for (int32_t i = 0; i < kept; ++i) {
    cum += std::exp(cand_[static_cast<size_t>(i)].logit - max_logit);
    if (cum >= target) {
      n_cand_ = i + 1;
      n_sorted_ = i + 1;
      return;
    }
  }
}

void Sampler::apply_min_p(float min_p) {
  if (min_p <= 0.0f || n_cand_ <= 1) return;
  // p_i >= min_p * p_max  <=>  logit_i >= logit_max + log(min_p): no softmax needed.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_cand_; ++i)
    max_logit = std::max(max_logit, cand_[static_cast<size_t>(i)].logit);
  const float threshold = max_logit + std::log(min_p);
  if (n_sorted_ == n_cand_) {
    int32_t keep = 1;
    while (keep < n_cand_ && cand_[static_cast<size_t>(keep)].logit >= threshold) ++keep;
    n_cand_ = keep;
    n_sorted_ = keep;
    return;
  }
  // Keep the survivors in place and in order (no temporary buffer: sample() must not allocate).
  int32_t kept = 0, kept_sorted = 0;
  for (int32_t i = 0; i < n_cand_; ++i) {
    if (cand_[static_cast<size_t>(i)].logit >= threshold) {
      if (i < n_sorted_) ++kept_sorted;
      cand_[static_cast<size_t>(kept++)] = cand_[static_cast<size_t>(i)];
    }
  }
  n_cand_ = std::max<int32_t>(1, kept);  // the maximum always passes unless it is -inf
  n_sorted_ = std::min(kept_sorted, n_cand_);
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int32_t Sampler::draw() {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int32_t i = 0; i < n_cand_; ++i)
    max_logit = std::max(max_logit, cand_[static_cast<size_t>(i)].logit);
  if (max_logit == -std::numeric_limits<float>::infinity()) {
    // Everything banned: fall back to the first candidate rather than dividing by zero.
    for (int32_t i = 0; i < n_cand_; ++i) cand_[static_cast<size_t>(i)].p = i == 0 ? 1.0f : 0.0f;
    return cand_[0].id;
  }
  double sum = 0.0;
  for (int32_t i = 0; i < n_cand_; ++i) {
    TokenCandidate& c = cand_[static_cast<size_t>(i)];
    c.p = static_cast<float>(std::exp(double{c.logit} - max_logit));
    sum += c.p;
  }
  const double r = uniform() * sum;
  double cum = 0.0;
  int32_t picked = -1;
  for (int32_t i = 0; i < n_cand_; ++i) {
    TokenCandidate& c = cand_[static_cast<size_t>(i)];
    cum += c.p;
    if (picked < 0 && r < cum) picked = i;
    c.p = static_cast<float>(c.p / sum);
  }
  if (picked < 0) {  // r landed on the rounding gap at the very top: the last non-zero one
    picked = n_cand_ - 1;
    while (picked > 0 && cand_[static_cast<size_t>(picked)].p == 0.0f) --picked;
  }
  return cand_[static_cast<size_t>(picked)].id;
}

int32_t Sampler::sample(const float* logits) {
  for (int32_t i = 0; i < n_vocab_; ++i) cand_[static_cast<size_t>(i)] = {i, logits[i], 0.0f};
  n_cand_ = n_vocab_;
  n_sorted_ = 0;

  apply_penalties();
  for (const auto& [id, bias] : params_.logit_bias) cand_[static_cast<size_t>(id)].logit += bias;

  if (params_.temperature <= 0.0f) {
    // Greedy: the first maximum (lowest id on ties), as an argmax over the vocabulary.
    int32_t best = 0;
    for (int32_t i = 1; i < n_vocab_; ++i) {
      if (cand_[static_cast<size_t>(i)].logit > cand_[static_cast<size_t>(best)].logit) best = i;
    }
    cand_[0] = {best, cand_[static_cast<size_t>(best)].logit, 1.0f};
    n_cand_ = 1;
    n_sorted_ = 1;
    return best;
  }

  apply_top_k(params_.top_k);
  apply_top_p(params_.top_p, params_.min_p);
  apply_min_p(params_.min_p);
  const float inv_temp = 1.0f / params_.temperature;
  for (int32_t i = 0; i < n_cand_; ++i) cand_[static_cast<size_t>(i)].logit *= inv_temp;
  return draw();
}

}  // namespace ponder
