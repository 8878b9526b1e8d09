// The scale searches behind the K-format quantizers: given a small group of values (16 or 32),
// find the scale (and for affine formats the min) and the integer levels that minimize a weighted
// squared (or absolute) error. They follow the searches of llama.cpp's reference quantizers
// (make_qx_quants, make_q3_quants, make_qkx2_quants), so our files are as accurate as theirs and,
// with the same float operations in the same order, identical to them.
// Internal to the quant layer. Depends on nothing but the standard library.
#pragma once

#include <cmath>
#include <cstdint>

namespace ponder::quant_internal {

// Groups whose largest magnitude is below this are stored as all zeros.
inline constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even (the default rounding mode), as an int. |x| must fit an int.
inline int round_nearest(float x) { return static_cast<int>(std::lrintf(x)); }

// Symmetric levels: x[i] ~= scale * (L[i] - nmax), L[i] in [0, 2 nmax). The error is weighted by
// `weights` if given, else by x^2. Tries 19 inverse scales around -nmax / max(|x|) (signed, so the
// largest magnitude maps to -nmax exactly) and keeps the least-squares best. Returns the scale.
float search_symmetric_scale(int n, int nmax, const float* x, int8_t* L, const float* weights);

// Symmetric levels as above, refined level by level: starting from -nmax / max, each L[i] is moved
// to the level that the least-squares scale of all the others asks for, while that lowers the
// x^2-weighted error (at most 5 sweeps). Used by Q3_K. Returns the scale.
float search_symmetric_scale_refined(int n, int nmax, const float* x, int8_t* L);

// Affine levels: x[i] ~= scale * L[i] - min, L[i] in [0, nmax], min >= 0 returned in *min_out.
// Fits scale and min by weighted least squares for the inverse scales
// (nmax + rmin + rdelta * k) / (max - min), k = 0..nstep, and keeps the one with the smallest
// weighted error (absolute if use_abs_error, else squared). n <= 32. Returns the scale.
float search_affine_scale(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                          float* min_out, float rmin, float rdelta, int nstep, bool use_abs_error);

}  // namespace ponder::quant_internal
