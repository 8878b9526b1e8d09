#include "quant/scale_search.h"

#include <algorithm>

#include "base/check.h"

namespace ponder::quant_internal {

namespace {

// Index of the element of largest magnitude (the first one on ties).
int index_of_max_abs(int n, const float* x) {
  int best = 0;
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      best = i;
    }
  }
  return best;
}

}  // namespace

float search_symmetric_scale(int n, int nmax, const float* x, int8_t* L, const float* weights) {
  const float max = x[index_of_max_abs(n, x)];
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  auto weight = [&](int i) { return weights ? weights[i] : x[i] * x[i]; };
  auto level = [&](float iscale, int i) {
    return std::clamp(round_nearest(iscale * x[i]), -nmax, nmax - 1);
  };

  // Start from the scale that maps the largest magnitude onto -nmax, then fit it.
  float iscale = -static_cast<float>(nmax) / max;
  float sum_lx = 0.0f;
  float sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = level(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = weight(i);
    sum_lx += w * x[i] * l;
    sum_l2 += w * l * l;
  }
  float scale = sum_l2 != 0.0f ? sum_lx / sum_l2 : 0.0f;
  // For the least-squares scale the weighted error is sum w x^2 - sum_lx^2 / sum_l2, so the best
  // candidate is the one with the largest sum_lx^2 / sum_l2.
  float best = scale * sum_lx;
  for (int step = -9; step <= 9; ++step) {
    if (step == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(step)) / max;
    sum_lx = 0.0f;
    sum_l2 = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = level(iscale, i);
      const float w = weight(i);
      sum_lx += w * x[i] * l;
      sum_l2 += w * l * l;
    }
    if (sum_l2 > 0.0f && sum_lx * sum_lx > best * sum_l2) {
      for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(level(iscale, i) + nmax);
      scale = sum_lx / sum_l2;
      best = scale * sum_lx;
    }
  }
  return scale;
}

float search_symmetric_scale_refined(int n, int nmax, const float* x, int8_t* L) {
  const float max = x[index_of_max_abs(n, x)];
  if (std::fabs(max) < kGroupMaxEps) {
    std::fill(L, L + n, int8_t{0});
    return 0.0f;
  }
  const float iscale = -static_cast<float>(nmax) / max;
  float sum_lx = 0.0f;
  float sum_l2 = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(round_nearest(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sum_lx += w * x[i] * l;
    sum_l2 += w * l * l;
  }
  // Coordinate descent: move one level at a time to where the scale fitted on the rest wants it,
  // keeping the move if sum_lx^2 / sum_l2 (the explained energy) grows.
  for (int sweep = 0; sweep < 5; ++sweep) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sum_lx - w * x[i] * L[i];
      if (slx <= 0.0f) continue;
      float sl2 = sum_l2 - w * L[i] * L[i];
      const int new_l = std::clamp(round_nearest(x[i] * sl2 / slx), -nmax, nmax - 1);
      if (new_l == L[i]) continue;
      slx += w * x[i] * new_l;
      sl2 += w * new_l * new_l;
      if (sl2 > 0.0f && slx * slx * sum_l2 > sum_lx * sum_lx * sl2) {
        L[i] = static_cast<int8_t>(new_l);
        sum_lx = slx;
        sum_l2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return sum_l2 > 0.0f ? sum_lx / sum_l2 : 0.0f;
}

float search_affine_scale(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                          float* min_out, float rmin, float rdelta, int nstep, bool use_abs_error) {
  PONDER_DCHECK(n <= 32);
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    min = std::min(min, x[i]);
    max = std::max(max, x[i]);
    sum_w += weights[i];
    sum_x += weights[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;  // the offset only ever shifts down: x = scale * L - min_out
  if (max == min) {
    std::fill(L, L + n, uint8_t{0});
    *min_out = -min;
    return 0.0f;
  }
  auto error_of = [&](float diff) { return use_abs_error ? std::fabs(diff) : diff * diff; };

  // Baseline: levels spread evenly over [min, max].
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    const int l = std::clamp(round_nearest(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    best_error += weights[i] * error_of(scale * l + min - x[i]);
  }
  if (nstep < 1) {
    *min_out = -min;
    return scale;
  }

  uint8_t candidate[32];
  for (int step = 0; step <= nstep; ++step) {
    iscale = (rmin + rdelta * static_cast<float>(step) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(round_nearest(iscale * (x[i] - min)), 0, nmax);
      candidate[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    // Weighted least squares for x ~= this_scale * l + this_min.
    const float det = sum_w * sum_l2 - sum_l * sum_l;
    if (det <= 0.0f) continue;
    float this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
    float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
    if (this_min > 0.0f) {  // a positive offset is not representable: refit through zero
      this_min = 0.0f;
      this_scale = sum_xl / sum_l2;
    }
    float error = 0.0f;
    for (int i = 0; i < n; ++i) {
      error += weights[i] * error_of(this_scale * candidate[i] + this_min - x[i]);
    }
    if (error < best_error) {
      std::copy(candidate, candidate + n, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  *min_out = -min;
  return scale;
}

}  // namespace ponder::quant_internal
