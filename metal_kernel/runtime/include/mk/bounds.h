// metal-kernel: METAL_KERNEL_MATH=bounds (compile_shader(..., math="bounds")),
// built with -DMK_MATH_BOUNDS (and -DMK_MATH_SEED=n).
//
// A GPU computes math functions less accurately than this runtime does by
// default (float functions within ~1 ulp, half ones in float and rounded
// once), which hides precision bugs. In bounds mode a function returns a
// value drawn from the set the MSL specification allows around the exact
// result (section 8.4, the table in runtime/math_bounds.py, generated into
// math_bounds.inc; docs/math-bounds.md). The draw is a hash of the seed, the
// function and its arguments: reproducible, and the same for every thread
// that computes the same thing.
#pragma once
#include <stdint.h>

#include <type_traits>

#ifdef MK_MATH_BOUNDS
#ifndef MK_MATH_SEED
#define MK_MATH_SEED 0
#endif

namespace mk {
namespace bounds {

// kind: 0 not perturbed, 1 ulps, 2 3 + floor(|2x|) ulps, 3 absolute on
// [lo, hi] (else ulps, or the same absolute error when ulps is 0), 4 formula.
struct Cell {
  int kind;
  double ulps, abs, lo, hi;
};
struct Bound {
  uint64_t id;  // the function's name, hashed: the draw never depends on addresses
  Cell precise, fast, half;
};
constexpr uint64_t name_id(const char* s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  while (*s) h = (h ^ uint64_t(uint8_t(*s++))) * 0x100000001b3ull;
  return h;
}
namespace table {
#define MK_CELL(kind, ulps, abs, lo, hi) Cell{kind, ulps, abs, lo, hi}
#define MK_BOUND(name, p, f, h) constexpr Bound name = {name_id(#name), p, f, h};
#include "math_bounds.inc"
#undef MK_BOUND
#undef MK_CELL
}  // namespace table

__attribute__((always_inline)) inline uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
template <class T> __attribute__((always_inline)) inline uint64_t bits(const T& x) {
  if constexpr (sizeof(T) == 2)
    return __builtin_bit_cast(uint16_t, x);
  else if constexpr (sizeof(T) == 4)
    return __builtin_bit_cast(uint32_t, x);
  else
    return __builtin_bit_cast(uint64_t, x);
}
// The draw for one call: the seed, the function's id, the arguments' bits.
template <class... A> __attribute__((always_inline)) inline uint64_t draw(uint64_t fn, const A&... a) {
  uint64_t h = mix(uint64_t(MK_MATH_SEED) ^ fn);
  ((h = mix(h ^ bits(a))), ...);
  return h;
}

// R (float, _Float16 or bfloat storage __bf16) arithmetic on bit patterns.
template <class R> __attribute__((always_inline)) inline R step(R r, int dir) {
  typedef std::conditional_t<sizeof(R) == 2, uint16_t, uint32_t> U;
  if (r != r || (dir > 0 && r == R(__builtin_inff())) || (dir < 0 && r == R(-__builtin_inff()))) return r;
  U u = __builtin_bit_cast(U, r);
  const U sign = U(U(1) << (sizeof(U) * 8 - 1));
  if (r == R(0.0f)) return __builtin_bit_cast(R, U(dir > 0 ? 1 : (sign | 1)));
  if ((r > R(0.0f)) == (dir > 0))
    u = U(u + 1);
  else
    u = U(u - 1);
  return __builtin_bit_cast(R, u);
}
// v rounded to R, to nearest even. double -> half goes through float rounded
// to odd (exact for the final rounding; the C runtime's __truncdfhf2 is not
// linked into kernel libraries).
template <class R> __attribute__((always_inline)) inline R narrow(double v) {
  if constexpr (std::is_same<R, _Float16>::value) {
    float f = float(v);
    if (f == f && double(f) != v) {
      uint32_t u = __builtin_bit_cast(uint32_t, f);
      if (__builtin_fabs(double(f)) > __builtin_fabs(v)) u -= 1;  // rounded away from zero: step back
      f = __builtin_bit_cast(float, u | 1u);                       // sticky bit
    }
    return R(f);
  } else {
    return R(v);
  }
}

// ulp(v) as the specification defines it: the distance between the two
// representable values around v.
template <class R> __attribute__((always_inline)) inline double ulp_at(double v) {
  R r = narrow<R>(v);
  R a = double(r) <= v ? r : step(r, -1);
  R b = step(a, +1);
  double d = double(b) - double(a);
  if (!(d < __builtin_inf())) d = double(a) - double(step(a, -1));
  return d < 0 ? -d : d;
}

// A value of R within cell `c` of the exact result v (x0: the argument the
// bound depends on).
template <class R> inline R pick(const Cell& c, double v, double x0, uint64_t h) {
  const R exact = narrow<R>(v);
  if (c.kind == 0 || !(v - v == 0)) return exact;  // not perturbed, or inf / NaN
  double e;
  if (c.kind == 1) {
    e = c.ulps * ulp_at<R>(v);
  } else if (c.kind == 2) {
    e = (3.0 + __builtin_floor(__builtin_fabs(2.0 * x0))) * ulp_at<R>(v);
  } else {
    const bool in = x0 >= c.lo && x0 <= c.hi;
    e = (in || c.ulps == 0) ? c.abs : c.ulps * ulp_at<R>(v);
  }
  const double u = double(h >> 11) * 0x1p-52 - 1.0;  // uniform in [-1, 1)
  R r = narrow<R>(v + u * e);
  for (int guard = 0; guard < 64 && __builtin_fabs(double(r) - v) > e; ++guard) r = step(r, double(r) > v ? -1 : +1);
  return __builtin_fabs(double(r) - v) > e ? exact : r;
}

template <class R> __attribute__((always_inline)) inline const Cell& cell(const Bound& b, bool fast) {
  if constexpr (std::is_same<R, _Float16>::value)
    return b.half;
  else
    return fast ? b.fast : b.precise;
}

// bfloat +, -, *, /: correctly rounded to nearest even, or toward zero
// (section 8.2 allows either), by the draw.
__attribute__((always_inline)) inline __bf16 round_bf(float exact, uint64_t h) {
  const __bf16 rne = __bf16(exact);
  const float back = float(rne);
  if (back == exact || exact != exact || (h & 1)) return rne;
  return __builtin_fabsf(back) > __builtin_fabsf(exact) ? step(rne, back > 0 ? -1 : +1) : rne;
}

}  // namespace bounds
}  // namespace mk
#endif  // MK_MATH_BOUNDS
