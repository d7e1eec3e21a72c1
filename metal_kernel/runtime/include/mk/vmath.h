// metal-kernel: exp, exp2, tanh, log and log2 for float that loops over threads can vectorise.
//
// libm's expf is a call, and a call stops LLVM's loop vectoriser: a kernel
// that takes exp or log of each element (softmax, GELU, SiLU, a
// cross-entropy, an exp over a tensor) then runs one thread at a time. These are branch-free inline code instead:
// a vectorised thread loop runs them lane by lane with the same operations.
//
// Same bits in scalar and vector code: every step is one IEEE operation or
// an explicit fma (nothing is left to floating-point contraction), so a
// thread's result does not depend on whether it ran in a vector body or in
// a scalar remainder, nor on the schedule. Error below 1 ulp over the whole
// float range, subnormal results included (tests/runtime/test_vmath.py
// measures it against the functions in double); Metal allows 4 ulp for exp
// and log and 5 for tanh (precise), more for fast::. NaN stays NaN, exp(+inf)
// = +inf, exp(-inf) = +0, tanh keeps the sign of zero, log(+-0) = -inf,
// log of a negative number is NaN.
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

// x = 2^k (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), and log(1 + f) as
// d + t, d a float and t a small correction (|t| < 0.03 |d|):
// d = f - f^2/2 rounded with what that rounding lost kept (Fast2Sum, as
// |f^2/2| < |f|; f^2's own rounding error kept by an fma), plus f^3 P(f),
// P of degree 8 fitted here to (log(1 + f) - f + f^2/2) / f^3 (relative
// error below 2e-9 with float coefficients). f = m - 1 is exact (Sterbenz).
// A subnormal x is first scaled by 2^23, exactly.
struct LogParts {
  float k, d, t;
};
MK_INLINE LogParts log_parts(float x) {
  const bool sub = x < 1.17549435e-38f;
  const float xs = sub ? x * 8388608.0f : x;
  const int b = __builtin_bit_cast(int, xs) - 0x3f3504f3;  // the bits of sqrt(1/2)
  const float m = __builtin_bit_cast(float, (b & 0x007fffff) + 0x3f3504f3);
  const float k = float(b >> 23) - (sub ? 23.0f : 0.0f);
  const float f = m - 1.0f;
  float p = 6.675271689891815e-2f;
  p = __builtin_fmaf(p, f, -1.1646434664726257e-1f);
  p = __builtin_fmaf(p, f, 1.190471202135086e-1f);
  p = __builtin_fmaf(p, f, -1.2411268800497055e-1f);
  p = __builtin_fmaf(p, f, 1.4217890799045563e-1f);
  p = __builtin_fmaf(p, f, -1.6667643189430237e-1f);
  p = __builtin_fmaf(p, f, 2.0002204179763794e-1f);
  p = __builtin_fmaf(p, f, -2.5000014901161194e-1f);
  p = __builtin_fmaf(p, f, 3.333331048488617e-1f);
  const float f2 = f * f;
  const float f2_lost = __builtin_fmaf(f, f, -f2);
  const float h = 0.5f * f2;
  const float d = f - h;
  const float d_lost = (f - d) - h;
  return {k, d, __builtin_fmaf(f2 * f, p, __builtin_fmaf(-0.5f, f2_lost, d_lost))};
}

// log's value for x > 0 finite is r; the IEEE results elsewhere.
MK_INLINE float log_special(float x, float r) {
  return x > 0.0f ? (x == __builtin_inff() ? x : r) : (x == 0.0f ? -__builtin_inff() : (x != x ? x : __builtin_nanf("")));
}

MK_INLINE float log(float x) {
  const LogParts l = log_parts(x);
  // k ln 2 + d + t, ln 2 in two parts: k times the first (16 significant
  // bits) is exact; adding d loses at most what Fast2Sum keeps (|k ln 2|
  // >= 0.69 > |d| unless k = 0, where it is exact).
  const float hi = l.k * 0.693145751953125f;
  const float s = hi + l.d;
  const float lost = (hi - s) + l.d;
  return log_special(x, s + __builtin_fmaf(l.k, 1.42860676e-6f, lost + l.t));
}

MK_INLINE float log2(float x) {
  const LogParts l = log_parts(x);
  // k + (d + t) log2(e), log2(e) in two parts; d times the first with its
  // rounding error (fma), added to k by Fast2Sum (|k| >= 1 > |d log2 e|).
  const float c = 1.44269502162933349609375f;
  const float ph = l.d * c;
  const float pl = __builtin_fmaf(l.d, c, -ph);
  const float s = l.k + ph;
  const float lost = (l.k - s) + ph;
  return log_special(x, s + __builtin_fmaf(l.t, c, __builtin_fmaf(l.d, 1.925963033500011079e-8f, pl + lost)));
}

}  // namespace vmath
}  // namespace mk
