// metal-kernel: the element operations of metal::fast:: under
// METAL_KERNEL_MATH=bounds (mk/math_namespaces.h uses them only then): Table
// 8.2 of the MSL specification, a bound drawn as for the precise functions
// (mk/bounds.h) or, where the specification gives a formula, that formula
// over other fast operations.
#pragma once

namespace metal {
namespace _mk {
// A fast function with a bound: draws within Table 8.2's cell (float) or
// answers as the precise function (half: Table 8.3 either way).
#define MK_FAST_CELL1(name)                                                             \
  struct op_fast_##name {                                                               \
    template <class R, class X> static MK_AI R call(const X& x_) {                      \
      if constexpr (!std::is_same<R, float>::value) {                                   \
        return op_##name::call<R>(x_);                                                  \
      } else {                                                                          \
        const double x = double(float(x_));                                             \
        return ::mk::bounds::pick<float>(::mk::bounds::table::name.fast, op_##name::ref(x), x, \
                                         ::mk::bounds::draw(~::mk::bounds::table::name.id, float(x_))); \
      }                                                                                 \
    }                                                                                   \
  };
MK_FAST_CELL1(acos)
MK_FAST_CELL1(asin)
MK_FAST_CELL1(atan)
MK_FAST_CELL1(cos)
MK_FAST_CELL1(cospi)
MK_FAST_CELL1(exp)
MK_FAST_CELL1(exp2)
MK_FAST_CELL1(log)
MK_FAST_CELL1(log2)
MK_FAST_CELL1(rsqrt)
MK_FAST_CELL1(sin)
MK_FAST_CELL1(sinpi)
#undef MK_FAST_CELL1
struct op_fast_divide {
  template <class R, class X, class Y> static MK_AI R call(const X& x_, const Y& y_) {
    if constexpr (!std::is_same<R, float>::value) {
      return op_divide::call<R>(x_, y_);
    } else {
      const double x = double(float(x_)), y = double(float(y_));
      return ::mk::bounds::pick<float>(::mk::bounds::table::divide.fast, op_divide::ref(x, y), x,
                                       ::mk::bounds::draw(~::mk::bounds::table::divide.id, float(x_), float(y_)));
    }
  }
};

// The formulas of Table 8.2, in float, over the fast functions above.
MK_INLINE float fexp(float x) { return op_fast_exp::call<float>(x); }
MK_INLINE float fexp2(float x) { return op_fast_exp2::call<float>(x); }
MK_INLINE float flog(float x) { return op_fast_log::call<float>(x); }
MK_INLINE float flog2(float x) { return op_fast_log2::call<float>(x); }
MK_INLINE float fdiv(float x, float y) { return op_fast_divide::call<float>(x, y); }
MK_INLINE float fsqrt(float x) {  // x * rsqrt(x), the special cases exact
  if (!(x > 0.0f) || x == __builtin_inff())
    return __builtin_sqrtf(x);
  return x * op_fast_rsqrt::call<float>(x);
}
MK_INLINE float ftan(float x) { return op_fast_sin::call<float>(x) * fdiv(1.0f, op_fast_cos::call<float>(x)); }

#define MK_FAST_FORMULA1(name, expr)                                                    \
  struct op_fast_##name {                                                               \
    template <class R, class X> static MK_AI R call(const X& x_) {                      \
      if constexpr (!std::is_same<R, float>::value) {                                   \
        return op_##name::call<R>(x_);                                                  \
      } else {                                                                          \
        const float x = float(x_);                                                      \
        return expr;                                                                    \
      }                                                                                 \
    }                                                                                   \
  };
MK_FAST_FORMULA1(acosh, flog(x + fsqrt(x * x - 1.0f)))
MK_FAST_FORMULA1(asinh, flog(x + fsqrt(x * x + 1.0f)))
MK_FAST_FORMULA1(atanh, 0.5f * flog(fdiv(1.0f + x, 1.0f - x)))
MK_FAST_FORMULA1(cosh, 0.5f * (fexp(x) + fexp(-x)))
MK_FAST_FORMULA1(sinh, 0.5f * (fexp(x) - fexp(-x)))
MK_FAST_FORMULA1(exp10, fexp2(x * 3.32192809488736234787f))
MK_FAST_FORMULA1(log10, flog2(x) * 0.301029995663981195214f)
MK_FAST_FORMULA1(sqrt, fsqrt(x))
MK_FAST_FORMULA1(tan, ftan(x))
MK_FAST_FORMULA1(tanh, fdiv(fexp(2.0f * x) - 1.0f, fexp(2.0f * x) + 1.0f))
MK_FAST_FORMULA1(tanpi, ftan(x * 3.14159265358979323846f))
#undef MK_FAST_FORMULA1
struct op_fast_atan2 {  // Table 8.2: atan(y/x) +/- pi; undefined at x = 0 or y = 0 (there: precise)
  template <class R, class X, class Y> static MK_AI R call(const X& y_, const Y& x_) {
    const float y = float(y_), x = float(x_);
    if (!std::is_same<R, float>::value || x == 0.0f || y == 0.0f)
      return op_atan2::call<R>(y_, x_);
    const float a = op_fast_atan::call<float>(fdiv(y, x));
    return R(x > 0.0f ? a : (y > 0.0f ? a + 3.14159265358979323846f : a - 3.14159265358979323846f));
  }
};
struct op_fast_pow {  // exp2(y * log2(x)); undefined at x = 0 and y = 0 (there: precise)
  template <class R, class X, class Y> static MK_AI R call(const X& x_, const Y& y_) {
    const float x = float(x_), y = float(y_);
    if (!std::is_same<R, float>::value || (x == 0.0f && y == 0.0f))
      return op_pow::call<R>(x_, y_);
    return R(fexp2(y * flog2(x)));
  }
};
struct op_fast_powr {
  template <class R, class X, class Y> static MK_AI R call(const X& x_, const Y& y_) {
    const float x = float(x_), y = float(y_);
    if (!std::is_same<R, float>::value || (x == 0.0f && y == 0.0f))
      return op_powr::call<R>(x_, y_);
    return R(fexp2(y * flog2(x)));
  }
};
}  // namespace _mk

}  // namespace metal
