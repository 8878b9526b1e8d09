#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

namespace ponder {
namespace testing_support {
long allocation_count();  // alloc_counter_for_test.cc
}  // namespace testing_support
namespace {

// A params set with every filter off: temperature 1, plain softmax sampling.
SamplerParams plain(uint64_t seed = 1) {
  SamplerParams p;
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.penalty_last_n = 0;
  p.seed = seed;
  return p;
}

std::vector<float> random_logits(int n, uint64_t seed, float spread = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, spread);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

std::vector<double> softmax(const std::vector<float>& logits, float temp = 1.0f) {
  const float max = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < p.size(); ++i) sum += p[i] = std::exp((double{logits[i]} - max) / temp);
  for (double& x : p) x /= sum;
  return p;
}

std::set<int32_t> survivors(const Sampler& s) {
  std::set<int32_t> ids;
  for (int32_t i = 0; i < s.n_candidates(); ++i) ids.insert(s.candidates()[i].id);
  return ids;
}

// Logits after the chain for every id, when no filter reorders the candidates.
std::vector<float> final_logits(const Sampler& s) {
  std::vector<float> out(s.n_vocab());
  EXPECT_EQ(s.n_candidates(), s.n_vocab());
  for (int32_t i = 0; i < s.n_candidates(); ++i)
    out[s.candidates()[i].id] = s.candidates()[i].logit;
  return out;
}

TEST(Sampler, GreedyIsTheArgmaxAndLowestIdOnTies) {
  SamplerParams p = plain();
  p.temperature = 0.0f;
  Sampler s(5, p);
  const float logits[] = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f};
  EXPECT_EQ(s.sample(logits), 1);
  EXPECT_EQ(s.n_candidates(), 1);
  EXPECT_EQ(s.candidates()[0].p, 1.0f);
  p.temperature = -1.0f;
  Sampler negative(5, p);
  EXPECT_EQ(negative.sample(logits), 1);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegative) {
  SamplerParams p = plain();
  p.penalty_last_n = 8;
  p.repeat_penalty = 2.0f;
  Sampler s(4, p);
  s.accept(0);
  s.accept(1);
  s.accept(1);  // repeated: the repetition penalty still applies once
  const float logits[] = {3.0f, -1.5f, 1.0f, -2.0f};
  s.sample(logits);
  EXPECT_EQ(final_logits(s), (std::vector<float>{1.5f, -3.0f, 1.0f, -2.0f}));
}

TEST(Sampler, PresenceAndFrequencyPenaltiesCountTheWindow) {
  SamplerParams p = plain();
  p.penalty_last_n = 4;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(4, p);
  for (int32_t t : {2, 0, 2, 2, 2}) s.accept(t);  // window: 0 2 2 2 (the first 2 fell out)
  const float logits[] = {1.0f, 1.0f, 1.0f, 1.0f};
  s.sample(logits);
  EXPECT_EQ(final_logits(s),
            (std::vector<float>{1.0f - 0.25f - 0.5f, 1.0f, 1.0f - 0.75f - 0.5f, 1.0f}));

  for (int32_t t : {1, 1, 1, 1}) s.accept(t);  // window: 1 1 1 1
  s.sample(logits);
  EXPECT_EQ(final_logits(s), (std::vector<float>{1.0f, 1.0f - 1.0f - 0.5f, 1.0f, 1.0f}));

  s.reset(1);  // forgets the window
  s.sample(logits);
  EXPECT_EQ(final_logits(s), (std::vector<float>{1.0f, 1.0f, 1.0f, 1.0f}));
}

TEST(Sampler, PenaltiesThenLogitBias) {
  SamplerParams p = plain();
  p.penalty_last_n = 4;
  p.repeat_penalty = 2.0f;
  p.logit_bias = {{0, 1.0f}, {3, -INFINITY}};
  Sampler s(4, p);
  s.accept(0);
  const float logits[] = {4.0f, 0.0f, 0.0f, 9.0f};
  s.sample(logits);
  // 4 / 2 + 1 = 3: the penalty is applied before the bias.
  const std::vector<float> out = final_logits(s);
  EXPECT_EQ(out[0], 3.0f);
  EXPECT_EQ(out[3], -INFINITY);
  for (int i = 0; i < 200; ++i) EXPECT_NE(s.sample(logits), 3);  // banned

  p.temperature = 0.0f;
  Sampler greedy(4, p);
  EXPECT_EQ(greedy.sample(logits), 0);
}

TEST(Sampler, TopKKeepsTheKHighest) {
  const std::vector<float> logits = random_logits(1000, 3);
  SamplerParams p = plain();
  p.top_k = 10;
  Sampler s(1000, p);
  s.sample(logits.data());
  std::vector<int32_t> order(1000);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  EXPECT_EQ(survivors(s), std::set<int32_t>(order.begin(), order.begin() + 10));
  for (int32_t i = 0; i < s.n_candidates(); ++i)
    EXPECT_EQ(s.candidates()[i].id, order[i]);  // sorted
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  for (uint64_t seed : {1, 2, 3}) {
    for (float top_p : {0.05f, 0.5f, 0.9f, 0.95f, 0.999f}) {
      for (float spread : {0.5f, 3.0f}) {
        const int n = 5000;
        const std::vector<float> logits = random_logits(n, seed, spread);
        SamplerParams p = plain(seed);
        p.top_p = top_p;
        Sampler s(n, p);
        s.sample(logits.data());

        const std::vector<double> prob = softmax(logits);
        std::vector<int32_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(),
                  [&](int32_t a, int32_t b) { return prob[a] > prob[b]; });
        double cum = 0;
        size_t k = 0;
        while (k < order.size() && cum < top_p) cum += prob[order[k++]];
        SCOPED_TRACE(testing::Message()
                     << "seed " << seed << " top_p " << top_p << " spread " << spread);
        EXPECT_EQ(survivors(s), std::set<int32_t>(order.begin(), order.begin() + k));
        double mass_without_last = cum - prob[order[k - 1]];
        EXPECT_LT(mass_without_last, top_p);  // smallest
        EXPECT_GE(cum, top_p - 1e-6);         // reaches p
      }
    }
  }
}

TEST(Sampler, MinPKeepsTokensWithinAFactorOfTheBest) {
  const int n = 3000;
  const std::vector<float> logits = random_logits(n, 9);
  const std::vector<double> prob = softmax(logits);
  const double p_max = *std::max_element(prob.begin(), prob.end());
  for (float min_p : {0.01f, 0.05f, 0.3f, 1.0f}) {
    SamplerParams p = plain();
    p.min_p = min_p;
    Sampler s(n, p);
    s.sample(logits.data());
    std::set<int32_t> expected;
    for (int i = 0; i < n; ++i) {
      if (prob[i] >= min_p * p_max * (1 - 1e-6)) expected.insert(i);
    }
    EXPECT_EQ(survivors(s), expected) << "min_p " << min_p;
  }
}

TEST(Sampler, ProbabilitiesOfTheSurvivorsSumToOne) {
  const std::vector<float> logits = random_logits(2000, 4);
  SamplerParams p;  // the defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.6
  Sampler s(2000, p);
  s.sample(logits.data());
  double sum = 0;
  for (int32_t i = 0; i < s.n_candidates(); ++i) sum += s.candidates()[i].p;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_LE(s.n_candidates(), 40);
}

// Draw counts against the expected distribution: every bin within 5 standard deviations, and a
// chi-square statistic far below what a wrong distribution gives.
void expect_frequencies(Sampler& s, const std::vector<float>& logits,
                        const std::vector<double>& expected) {
  const int draws = 20000;
  std::vector<int> counts(logits.size());
  for (int i = 0; i < draws; ++i) ++counts[s.sample(logits.data())];
  double chi2 = 0;
  int bins = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double mean = draws * expected[i];
    if (expected[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "id " << i;
      continue;
    }
    const double sd = std::sqrt(draws * expected[i] * (1 - expected[i]));
    EXPECT_NEAR(counts[i], mean, 5 * sd + 1) << "id " << i;
    chi2 += (counts[i] - mean) * (counts[i] - mean) / mean;
    ++bins;
  }
  // For k - 1 degrees of freedom the 99.9th percentile is below 3k + 10 for these sizes.
  EXPECT_LT(chi2, 3.0 * bins + 10) << "chi-square over " << bins << " bins";
}

TEST(Sampler, FrequenciesMatchTheSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f, 0.0f, 1.5f, -3.0f};
  for (float temp : {1.0f, 0.7f, 1.5f}) {
    SamplerParams p = plain(42);
    p.temperature = temp;
    Sampler s(8, p);
    SCOPED_TRACE(temp);
    expect_frequencies(s, logits, softmax(logits, temp));
  }
}

TEST(Sampler, FrequenciesAfterTopKMatchTheRenormalizedSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 0.5f, -1.0f, 2.5f, 0.0f, 1.5f, -3.0f};
  SamplerParams p = plain(7);
  p.top_k = 3;  // keeps ids 4, 1, 6
  p.temperature = 0.8f;
  Sampler s(8, p);
  std::vector<float> kept(8, -INFINITY);
  for (int id : {4, 1, 6}) kept[id] = logits[id];
  expect_frequencies(s, logits, softmax(kept, 0.8f));
}

TEST(Sampler, SeedsReproduce) {
  const std::vector<float> logits = random_logits(500, 5, 1.0f);
  SamplerParams p = plain(1234);
  p.top_k = 100;
  Sampler a(500, p), b(500, p);
  p.seed = 1235;
  Sampler c(500, p);
  std::vector<int32_t> ta, tb, tc;
  for (int i = 0; i < 200; ++i) {
    ta.push_back(a.sample(logits.data()));
    tb.push_back(b.sample(logits.data()));
    tc.push_back(c.sample(logits.data()));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);
  a.reset(1234);
  std::vector<int32_t> again;
  for (int i = 0; i < 200; ++i) again.push_back(a.sample(logits.data()));
  EXPECT_EQ(ta, again);
}

TEST(Sampler, SteadyStateDoesNotAllocate) {
  const int n = 152064;
  const std::vector<float> logits = random_logits(n, 6);
  SamplerParams p;
  p.top_k = 0;  // the top-p path grows its sorted prefix: it must not allocate either
  p.penalty_last_n = 64;
  p.repeat_penalty = 1.1f;
  p.presence_penalty = 0.2f;
  p.frequency_penalty = 0.1f;
  p.logit_bias = {{5, 2.0f}};
  Sampler s(n, p);
  const long before = testing_support::allocation_count();
  {
    std::vector<int> probe(3);
    probe[0] = 1;
    EXPECT_EQ(testing_support::allocation_count(), before + 1);
  }
  const long start = testing_support::allocation_count();
  for (int i = 0; i < 50; ++i) s.accept(s.sample(logits.data()));
  EXPECT_EQ(testing_support::allocation_count() - start, 0);
}

TEST(Sampler, ValidatesClientParameters) {
  SamplerParams p;
  EXPECT_TRUE(validate_sampler_params(p, 10).is_ok());
  p.logit_bias = {{10, 1.0f}};
  EXPECT_FALSE(validate_sampler_params(p, 10).is_ok());
  p.logit_bias = {{-1, 1.0f}};
  EXPECT_FALSE(validate_sampler_params(p, 10).is_ok());
  p.logit_bias.clear();
  p.top_p = 0.0f;
  EXPECT_FALSE(validate_sampler_params(p, 10).is_ok());
  p.top_p = 1.0f;
  p.repeat_penalty = 0.0f;
  EXPECT_FALSE(validate_sampler_params(p, 10).is_ok());
  p.repeat_penalty = 1.0f;
  p.temperature = NAN;
  EXPECT_FALSE(validate_sampler_params(p, 10).is_ok());
}

}  // namespace
}  // namespace ponder
