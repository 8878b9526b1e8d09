#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/ggml_math.h"

namespace ponder {

void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i)
    ss += static_cast<double>(x[i] * x[i]);  // float square, as llama.cpp
  // Mean in double, then the scale in float: llama.cpp's rounding, which its logits carry.
  const float mean = static_cast<float>(ss / static_cast<double>(n));
  const float scale = 1.0f / std::sqrt(mean + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_table(int32_t pos, int64_t head_dim, float theta, float* cos_out, float* sin_out) {
  // The angle of pair i is pos * theta^(-2i/head_dim), built up by repeated float products as
  // llama.cpp does: the rounding of the angle must match to reproduce its logits exactly.
  const float step = std::pow(theta, -2.0f / static_cast<float>(head_dim));
  float angle = static_cast<float>(pos);
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
    angle *= step;
  }
}

void rope_neox(float* v, int64_t head_dim, const float* cos_t, const float* sin_t) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = v[i];
    const float b = v[i + half];
    // The fused forms llama.cpp's compiler emits.
    v[i] = std::fma(a, cos_t[i], -(b * sin_t[i]));
    v[i + half] = std::fma(a, sin_t[i], b * cos_t[i]);
  }
}

void swiglu(const float* gate, const float* up, int64_t n, float* out) {
  swiglu_ggml(gate, up, n, out);  // llama.cpp's exp approximation: see ggml_math.h
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

}  // namespace ponder
