// Element-wise and row-wise operations of the forward pass, reference versions.
// Shapes are given per call; every function works on one or more contiguous rows.
// Depends on base only.
#pragma once

#include <cstdint>

namespace ponder {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i], for one row of n.
void rms_norm(const float* x, const float* weight, float eps, int64_t n, float* out);

// The rotary angles of a position: cos/sin[head_dim/2] of pos * theta^(-2i/head_dim). They depend
// on the position only, so one table serves every head of every layer.
void rope_table(int32_t pos, int64_t head_dim, float theta, float* cos_out, float* sin_out);

// NeoX-style rotary embedding in place on one head vector of head_dim: element i is rotated with
// element i + head_dim/2 by the angle of pair i (a rope_table).
void rope_neox(float* v, int64_t head_dim, const float* cos_t, const float* sin_t);

// out[i] = silu(gate[i]) * up[i]
void swiglu(const float* gate, const float* up, int64_t n, float* out);

// y[i] += x[i]
void add_inplace(float* y, const float* x, int64_t n);

}  // namespace ponder
