// The block loops of x86/ggml_math_x86.h written once for both x86 widths: O is F32xN<8> or
// F32xN<16> (x86/vec_traits.h), exp(v) that width's ggml_v_expf lanes (each file scales by 2^n its
// own way: vscalefps, or two exact multiplications on AVX2), sum16(p) the reduce-add order of the
// 16 floats at p (ggml_math.cc's reduce16). Included only inside the anonymous namespace of
// x86/ggml_math_avx2.cc and x86/ggml_math_avx512.cc (x86/tile_driver.h says why); depends on
// <cstdint> and x86/vec_traits.h, included by the including file.
#pragma once

// out[i] = silu(gate[i]) * up[i] for i < n (a multiple of the width): g / (1 + exp(0 - g)) * up.
template <class O, class Exp>
void swiglu_lanes(const float* gate, const float* up, int64_t n, float* out, Exp exp) {
  for (int64_t i = 0; i < n; i += O::kWidth) {
    const typename O::F g = O::loadu(gate + i);
    const typename O::F silu = O::div(g, O::add(O::set1(1.0f), exp(O::sub(O::set1(0.0f), g))));
    O::storeu(out + i, O::mul(silu, O::loadu(up + i)));
  }
}

// y[i] = exp(x[i] - max) for i < n16 (a multiple of 16); returns the blocks' float sums in double.
template <class O, class Exp, class Sum16>
double softmax_exp_lanes(const float* x, float max, int64_t n16, float* y, Exp exp, Sum16 sum16) {
  double sum = 0;
  const typename O::F m = O::set1(max);
  for (int64_t i = 0; i < n16; i += 16) {
    for (int l = 0; l < 16; l += O::kWidth)
      O::storeu(y + i + l, exp(O::sub(O::loadu(x + i + l), m)));
    sum += static_cast<double>(sum16(y + i));
  }
  return sum;
}
