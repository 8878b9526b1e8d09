// ggml's expf steps (ggml_v_expf; expf_ggml of ggml_math.cc and exp_nonpositive of
// block_attention.cc), written once for every float width: n = round(x / ln 2) by the 1.5 * 2^23
// trick, b = x - n ln 2 in two fused steps, then j = 1 + b + b^2 P(b) with the polynomial in
// ggml's fma order. The result is j * 2^n; each caller scales by 2^n its own way (exactly, for the
// n it lets through) and handles its own out-of-range inputs.
//
// Ops O is ScalarOps (below) or a vector width of x86/vec_traits.h; the same fused steps in the
// same order on each lane make every width bitwise the scalar one. Included only inside an
// anonymous namespace, in scalar and per-ISA translation units alike (see x86/tile_driver.h for
// why nothing is shared inline across ISAs). Depends on <cmath>, included by the including file.
#pragma once

// Float operations on one float, as O provides them for vectors (fnma(a, b, c) = c - a * b, fused).
struct ScalarOps {
  using F = float;
  static float set1(float v) { return v; }
  static float fma(float a, float b, float c) { return std::fma(a, b, c); }
  static float fnma(float a, float b, float c) { return std::fma(-a, b, c); }
  static float mul(float a, float b) { return a * b; }
  static float sub(float a, float b) { return a - b; }
};

// j, with *n_out = n: exp(x) = j * 2^n.
template <class O>
typename O::F exp_ggml_poly(typename O::F x, typename O::F* n_out) {
  using F = typename O::F;
  const F r = O::set1(0x1.8p23f);
  const F z = O::fma(x, O::set1(0x1.715476p+0f), r);
  const F n = O::sub(z, r);
  const F b = O::fnma(n, O::set1(0x1.7f7d1cp-20f), O::fnma(n, O::set1(0x1.62e4p-1f), x));
  const F u = O::mul(b, b);
  const F p = O::fma(O::fma(O::set1(0x1.0e4020p-7f), b, O::set1(0x1.573e2ep-5f)), u,
                     O::fma(O::set1(0x1.555e66p-3f), b, O::set1(0x1.fffdb6p-2f)));
  *n_out = n;
  return O::fma(p, u, O::fma(O::set1(0x1.ffffecp-1f), b, O::set1(1.0f)));
}
