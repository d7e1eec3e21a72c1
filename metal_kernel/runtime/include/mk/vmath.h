// metal-kernel: exp, exp2 and tanh for float that loops over threads can vectorise.
//
// libm's expf is a call, and a call stops LLVM's loop vectoriser: a kernel
// that takes exp of each element (softmax, GELU, SiLU, an exp over a tensor)
// then runs one thread at a time. These are branch-free inline code instead:
// a vectorised thread loop runs them lane by lane with the same operations.
//
// Same bits in scalar and vector code: every step is one IEEE operation or
// an explicit fma (nothing is left to floating-point contraction), so a
// thread's result does not depend on whether it ran in a vector body or in
// a scalar remainder, nor on the schedule. Error below 1 ulp over the whole
// float range, subnormal results included (tests/runtime/test_vmath.py
// measures it against the functions in double); Metal allows 4 ulp for exp
// and 5 for tanh (precise), more for fast::. NaN stays NaN, exp(+inf) =
// +inf, exp(-inf) = +0, tanh keeps the sign of zero.
#pragma once

namespace mk {
namespace vmath {

// 2^k * y for y in [0.7, 1.42] and integral k in [-150, 128]: two exact
// powers of two, so that a subnormal result is rounded once (the first
// product is always normal) and an overflowing one becomes +inf.
MK_INLINE float scale2(float y, float k) {
  const int ki = int(k);
  const int k1 = ki >> 1;  // floor(k / 2): in [-75, 64]
  const int k2 = ki - k1;  // in [-75, 64]
  return y * __builtin_bit_cast(float, (k1 + 127) << 23) * __builtin_bit_cast(float, (k2 + 127) << 23);
}

// exp(r) for |r| <= 0.35 (half of ln 2, plus the reduction's rounding):
// 1 + r + r^2 * P(r), P a polynomial of degree 5 (Cephes' expf; its own
// error is below 3e-9). 1 + r is kept as the rounded sum and what that
// rounding lost (Fast2Sum, exact as |r| < 1), so the result is rounded
// once at the end instead of twice.
MK_INLINE float exp_reduced(float r) {
  float p = 1.9875691500e-4f;
  p = __builtin_fmaf(p, r, 1.3981999507e-3f);
  p = __builtin_fmaf(p, r, 8.3334519073e-3f);
  p = __builtin_fmaf(p, r, 4.1665795894e-2f);
  p = __builtin_fmaf(p, r, 1.6666665459e-1f);
  p = __builtin_fmaf(p, r, 5.0000001201e-1f);
  const float rr = r * r;
  const float s = 1.0f + r;
  const float lost = (1.0f - s) + r;
  return s + __builtin_fmaf(rr, p, lost);
}

MK_INLINE float exp(float x) {
  // Past these exp is +inf / rounds to +0; inside them k stays in scale2's range.
  const float xc = __builtin_fminf(__builtin_fmaxf(x, -104.0f), 89.0f);
  const float k = __builtin_rintf(xc * 1.44269504088896341f);
  // r = x - k ln 2, ln 2 in two parts: k times the first (9 significant
  // bits) is exact and so is its difference with x (Sterbenz), so r is
  // rounded once, by the second step.
  const float r = __builtin_fmaf(k, 2.12194440e-4f, __builtin_fmaf(-k, 0.693359375f, xc));
  const float e = scale2(exp_reduced(r), k);
  return x != x ? x : e;
}

MK_INLINE float exp2(float x) {
  const float xc = __builtin_fminf(__builtin_fmaxf(x, -151.0f), 129.0f);
  const float k = __builtin_rintf(xc);
  const float f = xc - k;  // exact, in [-0.5, 0.5]
  // f ln 2 in float: ln 2 in two parts, the second's product folded in by the fma.
  const float r = __builtin_fmaf(f, 6.93147182464599609375e-1f, f * -1.90465429995776e-9f);
  const float e = scale2(exp_reduced(r), k);
  return x != x ? x : e;
}

// tanh: below |x| = 1, x + x^3 P(x^2) with P of degree 6 (fitted here to
// tanh on [0, 1]: relative error below 1e-8 with float coefficients); from
// 1 on, 1 - 2 / (exp(2|x|) + 1), which is 1 once exp overflows. Both are
// computed and one is selected, so the loop has no branch.
MK_INLINE float tanh(float x) {
  const float a = __builtin_fabsf(x);
  const float z = a * a;
  float p = -3.5873131128028035e-4f;
  p = __builtin_fmaf(p, z, 2.3024389520287514e-3f);
  p = __builtin_fmaf(p, z, -7.947747595608234e-3f);
  p = __builtin_fmaf(p, z, 2.148791402578354e-2f);
  p = __builtin_fmaf(p, z, -5.388030409812927e-2f);
  p = __builtin_fmaf(p, z, 1.33323535323143e-1f);
  p = __builtin_fmaf(p, z, -3.3333295583724976e-1f);
  const float small = __builtin_fmaf(a * z, p, a);
  const float big = 1.0f - 2.0f / (exp(2.0f * a) + 1.0f);
  const float t = __builtin_copysignf(a < 1.0f ? small : big, x);
  return x != x ? x : t;
}

}  // namespace vmath
}  // namespace mk
