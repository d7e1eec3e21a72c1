// metal-kernel: the MSL math, common and integer function libraries in
// namespace metal (relational, geometric, matrix and <metal_pack> functions:
// mk/geometric.h; metal::precise and metal::fast: mk/math_namespaces.h).
//
// Rules implemented:
//  * Every function exists for float and half scalars (exact, non-template
//    overloads, so they win over other libraries' templates the way Metal's
//    do) and, component-wise, for their vectors.  half results are computed
//    in float (or better) and rounded once.
//  * Exactly Apple's surface: no bfloat overloads (Metal has none: a bfloat
//    argument converts to float and the float overload answers, so
//    `exp(bfloat)` is a float), no scalar dot/length/distance/normalize.
//    Libraries that add their own (MLX's bf16_math.h, ggml's scalar dot,
//    PyTorch's `bfloat max`) then declare new overloads, never duplicates.
//  * Integer functions (abs, min, max, clamp, clz, ...) have exact overloads
//    for char, uchar, short, ushort, int, uint, long, ulong (+ bool for
//    min/max/clamp) and work component-wise on their vectors.
//  * A generic template per function accepts what Metal code commonly writes
//    beyond the exact overloads: mixed scalar types (`max(h, 0.5f)` -> float,
//    `pow(2, x)`), a scalar where a vector is expected (`clamp(v, 0.0f, 1.0f)`,
//    `mix(a, b, t)`), integer arguments to float-only functions (computed in
//    float).  The usual C++ arithmetic conversions decide mixed scalar types;
//    double (which the rewriter never lets through) is treated as float.
//  * No <cmath>: clang builtins are used so no libm name lands in the global
//    namespace (a `using namespace metal; sin(x)` must stay unambiguous).
//  * Metal has no erf/erfc/log1p/expm1/hypot/cbrt: they are deliberately not
//    defined (PyTorch's c10/metal defines its own).
#ifndef MK_MATH_H
#define MK_MATH_H

#include "bounds.h"
#include "traits.h"
#include "vmath.h"

namespace metal {
namespace _mk {

// ---------------------------------------------------------------------------
// Result-type machinery.
template <class T> struct fp_res { typedef float type; };          // ints, double -> float
template <> struct fp_res<half> { typedef half type; };
template <> struct fp_res<bfloat> { typedef bfloat type; };
template <class T> using fpres = typename fp_res<T>::type;
template <class T> using same_t = T;

template <class T> struct undouble { typedef T type; };
template <> struct undouble<double> { typedef float type; };

// common scalar type of two arithmetic scalars (Metal-ish): same type stays,
// two different floating types -> float, float with integer -> the float
// type, two integers -> the C++ common type.
template <class T> struct tag { typedef T type; };
template <class A, class B> constexpr auto sc2_pick() {
  if constexpr (std::is_same<A, B>::value)
    return tag<typename undouble<A>::type>{};
  else if constexpr (is_fp_v<A> && is_fp_v<B>)
    return tag<float>{};
  else if constexpr (is_fp_v<A>)
    return tag<typename undouble<A>::type>{};
  else if constexpr (is_fp_v<B>)
    return tag<typename undouble<B>::type>{};
  else
    return tag<std::common_type_t<A, B>>{};
}
template <class A, class B, class = void> struct sc2 {};
template <class A, class B> struct sc2<A, B, std::enable_if_t<is_arith_v<A> && is_arith_v<B>>> {
  typedef typename decltype(sc2_pick<A, B>())::type type;
};
template <class... X> struct scommon {};
template <class A> struct scommon<A> {
  typedef typename sc2<A, A>::type type;
};
template <class A, class B, class... R> struct scommon<A, B, R...> : scommon<typename sc2<A, B>::type, R...> {};
template <class... X> using scommon_t = typename scommon<X...>::type;

// common vector type: void if all scalars, bad if incompatible
struct bad {};
template <class Acc, class X> struct vacc { typedef bad type; };
template <class X> struct vacc<void, X> {
  typedef std::conditional_t<is_arith_v<X>, void,
                             std::conditional_t<vinfo<X>::is_vec || vinfo<X>::is_packed,
                                                vec<elem_t<X>, vinfo<X>::n>, bad>>
      type;
};
template <class T, int N, class X> struct vacc<vec<T, N>, X> {
  typedef std::conditional_t<is_arith_v<X> || std::is_same<X, vec<T, N>>::value ||
                                 std::is_same<X, packed_vec<T, N>>::value,
                             vec<T, N>, bad>
      type;
};
template <class Acc, class... X> struct cvec { typedef Acc type; };
template <class Acc, class X, class... R> struct cvec<Acc, X, R...> : cvec<typename vacc<Acc, X>::type, R...> {};
template <class... R> struct cvec<bad, R...> { typedef bad type; };
template <class... X> using cvec_t = typename cvec<void, std::remove_cv_t<X>...>::type;

// arguments usable by the generic templates
// bfloat takes no part: Apple's library has no bfloat overloads (a bfloat
// argument converts to float and the float overload answers).
template <class X> constexpr bool argok1_ = is_arith_v<X> && !std::is_same<X, bfloat>::value;
template <class X> constexpr bool argok1 = argok1_<X> || ((is_vec_v<X> || is_packed_v<X>) && argok1_<elem_t<X>>);
template <class V, class = void> struct has_type : std::false_type {};
template <class V> struct has_type<V, std::void_t<typename V::type>> : std::true_type {};
template <class... X> constexpr bool args_ok_impl() {
  if constexpr (!(argok1<X> && ...))
    return false;
  else if constexpr (std::is_same<cvec_t<X...>, bad>::value)
    return false;
  else if constexpr (std::is_void<cvec_t<X...>>::value)
    return has_type<scommon<X...>>::value;
  else
    return true;
}
template <class... X> constexpr bool args_ok = args_ok_impl<X...>();
template <class... X> constexpr bool any_vec = !std::is_void<cvec_t<X...>>::value;

template <class X, class K> constexpr bool ldexp_ok2() {
  return argok1<X> && (is_int_v<K> || ((is_vec_v<K> || is_packed_v<K>) && is_int_v<elem_t<K>>));
}
template <class X> MK_INLINE constexpr auto comp(const X& x, int i) {
  if constexpr (is_vec_v<X> || is_packed_v<X>)
    return x[i];
  else
    return x;
}

// apply F component-wise; RT maps the common element type to the result type
template <template <class> class RT, class F, class... X> MK_INLINE auto apply(const X&... x) {
  typedef cvec_t<X...> V;
  if constexpr (std::is_void<V>::value) {
    typedef RT<scommon_t<X...>> R;
    return F::template call<R>(x...);
  } else {
    typedef RT<typename vinfo<V>::elem> R;
    constexpr int N = vinfo<V>::n;
    vec<R, N> r;
    for (int i = 0; i < N; ++i)
      r[i] = F::template call<R>(comp(x, i)...);
    return r;
  }
}

// float bit helpers
MK_INLINE constexpr bool f_isnan(float x) { return x != x; }
MK_INLINE constexpr bool f_isinf(float x) { return __builtin_fabsf(x) == __builtin_inff(); }

// sin(pi x) etc. with exact argument reduction (in double)
MK_INLINE double sinpi_d(double x) {
  double r = x - 2.0 * __builtin_rint(x * 0.5); // [-1, 1], exact
  if (r > 0.5)
    r = 1.0 - r;
  else if (r < -0.5)
    r = -1.0 - r;
  double s = __builtin_sin(3.14159265358979323846 * r);
  return s == 0.0 ? __builtin_copysign(0.0, x) : s;
}
MK_INLINE double cospi_d(double x) {
  double r = x - 2.0 * __builtin_rint(x * 0.5); // [-1, 1]
  double a = __builtin_fabs(r);                 // cos is even
  double t = 0.5 - a;                           // cospi(a) = sinpi(0.5 - a), exact
  double c = __builtin_sin(3.14159265358979323846 * t);
  return c == 0.0 ? 0.0 : c;
}
MK_INLINE float f_sinpi(float x) { return f_isinf(x) ? __builtin_nanf("") : (float)sinpi_d(x); }
MK_INLINE float f_cospi(float x) { return f_isinf(x) ? __builtin_nanf("") : (float)cospi_d(x); }
MK_INLINE float f_tanpi(float x) {
  if (f_isinf(x))
    return __builtin_nanf("");
  return (float)(sinpi_d(x) / cospi_d(x));
}
// OpenCL/Metal powr: defined for x >= 0 only. T is float, or double for the
// bounds mode's exact reference.
template <class T> MK_INLINE T t_powr(T x, T y) {
  const T inf = T(__builtin_inf()), nan = T(__builtin_nan(""));
  if (x < T(0) || x != x || y != y)
    return nan;
  if (x == T(0))
    return y == T(0) ? nan : (y < T(0) ? inf : T(0));
  if ((x == inf && y == T(0)) || (x == T(1) && (y == inf || y == -inf)))
    return nan;
  if constexpr (std::is_same<T, float>::value)
    return __builtin_powf(x, y);
  else
    return __builtin_pow(x, y);
}
MK_INLINE float f_powr(float x, float y) { return t_powr(x, y); }
MK_INLINE float f_sign(float x) {
  return x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : (x == 0.0f ? x : 0.0f));
}
MK_INLINE float f_fract(float x) { return __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f); }
MK_INLINE float f_clamp(float x, float lo, float hi) { return __builtin_fminf(__builtin_fmaxf(x, lo), hi); }
MK_INLINE float f_smoothstep(float e0, float e1, float x) {
  float t = f_clamp((x - e0) / (e1 - e0), 0.0f, 1.0f);
  return t * t * (3.0f - 2.0f * t);
}

// nextafter on the bit pattern of T (float, half, bfloat)
template <class T, class U> MK_INLINE T nextafter_bits(T x, T y) {
  float fx = float(x), fy = float(y);
  if (f_isnan(fx) || f_isnan(fy))
    return T(__builtin_nanf(""));
  if (fx == fy)
    return y;
  U u = __builtin_bit_cast(U, x);
  const U sign = U(U(1) << (sizeof(U) * 8 - 1));
  if (fx == 0.0f) {
    u = U(1);
    if (fy < 0.0f)
      u = U(u | sign);
    return __builtin_bit_cast(T, u);
  }
  if ((fx < fy) == (fx > 0.0f))
    u = U(u + 1);
  else
    u = U(u - 1);
  return __builtin_bit_cast(T, u);
}

// ---------------------------------------------------------------------------
// Floating-point element operations computed in float ("FOP").
#define MK_FOP1(name, expr)                                                             \
  struct op_##name {                                                                    \
    template <class R, class X> static MK_AI R call(const X& x_) {                      \
      const float x = float(x_);                                                        \
      return R(expr);                                                                   \
    }                                                                                   \
  };
#define MK_FOP2(name, expr)                                                             \
  struct op_##name {                                                                    \
    template <class R, class X, class Y> static MK_AI R call(const X& x_, const Y& y_) { \
      const float x = float(x_), y = float(y_);                                         \
      return R(expr);                                                                   \
    }                                                                                   \
  };
#define MK_FOP3(name, expr)                                                             \
  struct op_##name {                                                                    \
    template <class R, class X, class Y, class Z>                                       \
    static MK_AI R call(const X& x_, const Y& y_, const Z& z_) {                        \
      const float x = float(x_), y = float(y_), z = float(z_);                          \
      return R(expr);                                                                   \
    }                                                                                   \
  };

// The functions whose accuracy Metal bounds (runtime/math_bounds.py): `dexpr`
// is the exact result, in double. METAL_KERNEL_MATH=bounds (mk/bounds.h)
// draws the result from the set the bound allows around it.
#ifdef MK_MATH_BOUNDS
#define MK_FOP1B(name, expr, dexpr)                                                     \
  struct op_##name {                                                                    \
    static MK_AI double ref(double x) { return dexpr; }                                 \
    template <class R, class X> static MK_AI R call(const X& x_) {                      \
      const double x = double(float(x_));                                               \
      return ::mk::bounds::pick<R>(::mk::bounds::cell<R>(::mk::bounds::table::name, false), ref(x), x, \
                                   ::mk::bounds::draw(::mk::bounds::table::name.id, float(x_))); \
    }                                                                                   \
  };
#define MK_FOP2B(name, expr, dexpr)                                                     \
  struct op_##name {                                                                    \
    static MK_AI double ref(double x, double y) { return dexpr; }                       \
    template <class R, class X, class Y> static MK_AI R call(const X& x_, const Y& y_) { \
      const double x = double(float(x_)), y = double(float(y_));                        \
      return ::mk::bounds::pick<R>(::mk::bounds::cell<R>(::mk::bounds::table::name, false), ref(x, y), x, \
                                   ::mk::bounds::draw(::mk::bounds::table::name.id, float(x_), float(y_))); \
    }                                                                                   \
  };
#else
#define MK_FOP1B(name, expr, dexpr) MK_FOP1(name, expr)
#define MK_FOP2B(name, expr, dexpr) MK_FOP2(name, expr)
#endif

MK_FOP1B(acos, __builtin_acosf(x), __builtin_acos(x))
MK_FOP1B(acosh, __builtin_acoshf(x), __builtin_acosh(x))
MK_FOP1B(asin, __builtin_asinf(x), __builtin_asin(x))
MK_FOP1B(asinh, __builtin_asinhf(x), __builtin_asinh(x))
MK_FOP1B(atan, __builtin_atanf(x), __builtin_atan(x))
MK_FOP1B(atanh, __builtin_atanhf(x), __builtin_atanh(x))
MK_FOP1(ceil, __builtin_ceilf(x))
MK_FOP1B(cos, __builtin_cosf(x), __builtin_cos(x))
MK_FOP1B(cosh, __builtin_coshf(x), __builtin_cosh(x))
MK_FOP1B(cospi, f_cospi(x), __builtin_isinf(x) ? __builtin_nan("") : cospi_d(x))
// exp, exp2 (and log, log2, tanh below): inline code a thread loop vectorises (mk/vmath.h), not libm's calls.
MK_FOP1B(exp, ::mk::vmath::exp(x), __builtin_exp(x))
MK_FOP1B(exp2, ::mk::vmath::exp2(x), __builtin_exp2(x))
MK_FOP1B(exp10, __builtin_exp10f(x), __builtin_pow(10.0, x))
MK_FOP1(fabs, __builtin_fabsf(x))
MK_FOP1(floor, __builtin_floorf(x))
MK_FOP1(fract, f_fract(x))
MK_FOP1B(log, ::mk::vmath::log(x), __builtin_log(x))  // inline, loops vectorise (mk/vmath.h)
MK_FOP1B(log2, ::mk::vmath::log2(x), __builtin_log2(x))
MK_FOP1B(log10, __builtin_log10f(x), __builtin_log10(x))
MK_FOP1(logb, __builtin_logbf(x))
MK_FOP1(rint, __builtin_roundevenf(x))
MK_FOP1(round, __builtin_roundf(x))
MK_FOP1B(rsqrt, 1.0f / __builtin_sqrtf(x), 1.0 / __builtin_sqrt(x))
MK_FOP1B(sin, __builtin_sinf(x), __builtin_sin(x))
MK_FOP1B(sinh, __builtin_sinhf(x), __builtin_sinh(x))
MK_FOP1B(sinpi, f_sinpi(x), __builtin_isinf(x) ? __builtin_nan("") : sinpi_d(x))
MK_FOP1B(sqrt, __builtin_sqrtf(x), __builtin_sqrt(x))
MK_FOP1B(tan, __builtin_tanf(x), __builtin_tan(x))
MK_FOP1B(tanh, ::mk::vmath::tanh(x), __builtin_tanh(x))  // inline, loops vectorise (mk/vmath.h)
MK_FOP1B(tanpi, f_tanpi(x), __builtin_isinf(x) ? __builtin_nan("") : sinpi_d(x) / cospi_d(x))
MK_FOP1(trunc, __builtin_truncf(x))
MK_FOP1(saturate, f_clamp(x, 0.0f, 1.0f))
MK_FOP1(sign, f_sign(x))
MK_FOP2B(atan2, __builtin_atan2f(x, y), __builtin_atan2(x, y))
MK_FOP2(copysign, __builtin_copysignf(x, y))
MK_FOP2B(divide, x / y, x / y)
MK_FOP2(fdim, __builtin_fdimf(x, y))
MK_FOP2(fmod, __builtin_fmodf(x, y))
MK_FOP2B(pow, __builtin_powf(x, y), __builtin_pow(x, y))
MK_FOP2B(powr, f_powr(x, y), t_powr(x, y))
MK_FOP2(step, y < x ? 0.0f : 1.0f)
MK_FOP3(fma, __builtin_fmaf(x, y, z))
MK_FOP3(mix, x + (y - x) * z)
MK_FOP3(smoothstep, f_smoothstep(x, y, z))

// ---------------------------------------------------------------------------
// Typed element operations (type preserved; floats and integers): "TOP".
template <class T> MK_INLINE constexpr T t_max(T a, T b) {
  if constexpr (is_fp_v<T>)
    return a != a ? b : (b != b ? a : (a < b ? b : a));
  else
    return a < b ? b : a;
}
template <class T> MK_INLINE constexpr T t_min(T a, T b) {
  if constexpr (is_fp_v<T>)
    return a != a ? b : (b != b ? a : (b < a ? b : a));
  else
    return b < a ? b : a;
}
template <> MK_INLINE constexpr float t_max(float a, float b) { return __builtin_fmaxf(a, b); }
template <> MK_INLINE constexpr float t_min(float a, float b) { return __builtin_fminf(a, b); }
template <class T> MK_INLINE constexpr T t_abs(T a) {
  if constexpr (std::is_same<T, float>::value)
    return __builtin_fabsf(a);
  else if constexpr (is_fp_v<T>)
    return T(__builtin_fabsf(float(a)));
  else if constexpr (std::is_signed<T>::value)
    return a < 0 ? T(std::make_unsigned_t<T>(0) - std::make_unsigned_t<T>(a)) : a;
  else
    return a;
}
template <class T> MK_INLINE constexpr T t_clamp(T x, T lo, T hi) { return t_min(t_max(x, lo), hi); }
template <class T> MK_INLINE constexpr T t_median3(T a, T b, T c) {
  return t_max(t_min(a, b), t_min(t_max(a, b), c));
}

struct op_max {
  template <class R, class X, class Y> static MK_AI R call(const X& x, const Y& y) { return t_max<R>(R(x), R(y)); }
};
struct op_min {
  template <class R, class X, class Y> static MK_AI R call(const X& x, const Y& y) { return t_min<R>(R(x), R(y)); }
};
struct op_abs {
  template <class R, class X> static MK_AI R call(const X& x) { return t_abs<R>(R(x)); }
};
struct op_clamp {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return t_clamp<R>(R(x), R(y), R(z));
  }
};
struct op_max3 {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return t_max<R>(t_max<R>(R(x), R(y)), R(z));
  }
};
struct op_min3 {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return t_min<R>(t_min<R>(R(x), R(y)), R(z));
  }
};
struct op_median3 {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return t_median3<R>(R(x), R(y), R(z));
  }
};
struct op_nextafter {
  template <class R, class X, class Y> static MK_AI R call(const X& x, const Y& y) {
    if constexpr (std::is_same<R, float>::value)
      return __builtin_nextafterf(float(x), float(y));
    else
      return nextafter_bits<R, unsigned short>(R(x), R(y));
  }
};

} // namespace _mk

// ===========================================================================
// Public functions.
//
// MK_F1(name):    float/half exact overloads + generic template (FOP)
// MK_T*(name):    typed ops: float/half + all integer exact overloads
// MK_I*(name):    integer-only ops: exact overloads for every integer type
#define MK_FP_SCALARS(M) M(float) M(half)
#define MK_INT_SCALARS(M) M(char) M(signed char) M(uchar) M(short) M(ushort) M(int) M(uint) M(long) M(ulong)

// MK_Fn_OP(name, op): the functions `name` computed by element operation `op`
// (mk/bounds_fast.h uses other ops for metal::fast:: in bounds mode).
#define MK_F1_OP(name, op)                                                              \
  MK_INLINE float name(float x) { return op::call<float>(x); }                           \
  MK_INLINE half name(half x) { return op::call<half>(x); }                              \
  template <class... X, std::enable_if_t<sizeof...(X) == 1 && _mk::args_ok<X...>, int> = 0> \
  MK_INLINE auto name(const X&... x) { return _mk::apply<_mk::fpres, op>(x...); }
#define MK_F2_OP(name, op)                                                              \
  MK_INLINE float name(float x, float y) { return op::call<float>(x, y); }               \
  MK_INLINE half name(half x, half y) { return op::call<half>(x, y); }                   \
  template <class... X, std::enable_if_t<sizeof...(X) == 2 && _mk::args_ok<X...>, int> = 0> \
  MK_INLINE auto name(const X&... x) { return _mk::apply<_mk::fpres, op>(x...); }
#define MK_F1(name) MK_F1_OP(name, _mk::op_##name)
#define MK_F2(name) MK_F2_OP(name, _mk::op_##name)
#define MK_F3(name)                                                                     \
  MK_INLINE float name(float x, float y, float z) { return _mk::op_##name::call<float>(x, y, z); } \
  MK_INLINE half name(half x, half y, half z) { return _mk::op_##name::call<half>(x, y, z); } \
  template <class... X, std::enable_if_t<sizeof...(X) == 3 && _mk::args_ok<X...>, int> = 0> \
  MK_INLINE auto name(const X&... x) { return _mk::apply<_mk::fpres, _mk::op_##name>(x...); }

// typed (type-preserving) ops over floats and integers
#define MK_T1_ONE(T) MK_INLINE T MK_T_NAME(T x) { return MK_T_OP::call<T>(x); }
#define MK_T2_ONE(T) MK_INLINE T MK_T_NAME(T x, T y) { return MK_T_OP::call<T>(x, y); }
#define MK_T3_ONE(T) MK_INLINE T MK_T_NAME(T x, T y, T z) { return MK_T_OP::call<T>(x, y, z); }

#define MK_GENN(name, n, cond)                                                          \
  template <class... X, std::enable_if_t<sizeof...(X) == n && _mk::args_ok<X...> && cond, int> = 0> \
  MK_INLINE auto name(const X&... x) { return _mk::apply<_mk::same_t, _mk::op_##name>(x...); }
#define MK_GEN1(name) MK_GENN(name, 1, true)
#define MK_GEN2(name) MK_GENN(name, 2, true)
#define MK_GEN3(name) MK_GENN(name, 3, true)

// ---- math functions (float types) ------------------------------------------
MK_F1(acos)
MK_F1(acosh)
MK_F1(asin)
MK_F1(asinh)
MK_F1(atan)
MK_F1(atanh)
MK_F1(ceil)
MK_F1(cos)
MK_F1(cosh)
MK_F1(cospi)
MK_F1(exp)
MK_F1(exp2)
MK_F1(exp10)
MK_F1(fabs)
MK_F1(floor)
MK_F1(fract)
MK_F1(log)
MK_F1(log2)
MK_F1(log10)
MK_F1(logb)
MK_F1(rint)
MK_F1(round)
MK_F1(rsqrt)
MK_F1(sin)
MK_F1(sinh)
MK_F1(sinpi)
MK_F1(sqrt)
MK_F1(tan)
MK_F1(tanh)
MK_F1(tanpi)
MK_F1(trunc)
MK_F2(atan2)
MK_F2(copysign)
MK_F2(divide)
MK_F2(fdim)
MK_F2(fmod)
MK_F2(pow)
MK_F2(powr)
MK_F3(fma)

// fmax/fmin/fmax3/fmin3/fmedian3: float types only (typed: no conversion)
#define MK_T_OP _mk::op_max
#define MK_T_NAME fmax
MK_FP_SCALARS(MK_T2_ONE)
#undef MK_T_NAME
#define MK_T_NAME max
MK_FP_SCALARS(MK_T2_ONE)
MK_INT_SCALARS(MK_T2_ONE)
MK_T2_ONE(bool)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_min
#define MK_T_NAME fmin
MK_FP_SCALARS(MK_T2_ONE)
#undef MK_T_NAME
#define MK_T_NAME min
MK_FP_SCALARS(MK_T2_ONE)
MK_INT_SCALARS(MK_T2_ONE)
MK_T2_ONE(bool)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_max3
#define MK_T_NAME fmax3
MK_FP_SCALARS(MK_T3_ONE)
#undef MK_T_NAME
#define MK_T_NAME max3
MK_FP_SCALARS(MK_T3_ONE)
MK_INT_SCALARS(MK_T3_ONE)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_min3
#define MK_T_NAME fmin3
MK_FP_SCALARS(MK_T3_ONE)
#undef MK_T_NAME
#define MK_T_NAME min3
MK_FP_SCALARS(MK_T3_ONE)
MK_INT_SCALARS(MK_T3_ONE)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_median3
#define MK_T_NAME fmedian3
MK_FP_SCALARS(MK_T3_ONE)
#undef MK_T_NAME
#define MK_T_NAME median3
MK_FP_SCALARS(MK_T3_ONE)
MK_INT_SCALARS(MK_T3_ONE)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_clamp
#define MK_T_NAME clamp
MK_FP_SCALARS(MK_T3_ONE)
MK_INT_SCALARS(MK_T3_ONE)
MK_T3_ONE(bool)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_abs
#define MK_T_NAME abs
MK_FP_SCALARS(MK_T1_ONE)
MK_INT_SCALARS(MK_T1_ONE)
#undef MK_T_NAME
#undef MK_T_OP
#define MK_T_OP _mk::op_nextafter
#define MK_T_NAME nextafter
MK_FP_SCALARS(MK_T2_ONE)
#undef MK_T_NAME
#undef MK_T_OP

namespace _mk {
typedef op_max op_fmax;
typedef op_min op_fmin;
typedef op_max3 op_fmax3;
typedef op_min3 op_fmin3;
typedef op_median3 op_fmedian3;
} // namespace _mk
MK_GEN2(fmax)
MK_GEN2(max)
MK_GEN2(fmin)
MK_GEN2(min)
MK_GEN3(fmax3)
MK_GEN3(max3)
MK_GEN3(fmin3)
MK_GEN3(min3)
MK_GEN3(fmedian3)
MK_GEN3(median3)
MK_GEN3(clamp)
MK_GEN1(abs)
MK_GEN2(nextafter)

// frexp / ldexp / ilogb / modf / sincos
MK_INLINE float frexp(float x, int& e) { return __builtin_frexpf(x, &e); }
MK_INLINE half frexp(half x, int& e) { return half(__builtin_frexpf(float(x), &e)); }
template <class T, int N, class I, std::enable_if_t<_mk::is_int_v<I>, int> = 0>
MK_INLINE vec<T, N> frexp(const vec<T, N>& x, vec<I, N>& e) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) {
    int ei;
    r[i] = frexp(x[i], ei);
    e[i] = I(ei);
  }
  return r;
}
MK_INLINE float ldexp(float x, int k) { return __builtin_ldexpf(x, k); }
MK_INLINE half ldexp(half x, int k) { return half(__builtin_ldexpf(float(x), k)); }
namespace _mk {
template <class X, class K> MK_INLINE auto ldexp_gen(const X& x, const K& k);
template <class... A> constexpr bool ldexp_ok() {
  if constexpr (sizeof...(A) != 2)
    return false;
  else
    return ldexp_ok2<A...>();
}
} // namespace _mk
template <class... A, std::enable_if_t<_mk::ldexp_ok<A...>(), int> = 0>
MK_INLINE auto ldexp(const A&... a) {
  return _mk::ldexp_gen(a...);
}
template <class X, class K> MK_INLINE auto _mk::ldexp_gen(const X& x, const K& k) {
  if constexpr (_mk::is_vec_v<X> || _mk::is_packed_v<X>) {
    typedef _mk::fpres<_mk::elem_t<X>> R;
    constexpr int N = _mk::vinfo<X>::n;
    vec<R, N> r;
    for (int i = 0; i < N; ++i)
      r[i] = ldexp(R(x[i]), int(_mk::comp(k, i)));
    return r;
  } else {
    return ldexp(_mk::fpres<X>(x), int(k));
  }
}
MK_INLINE int ilogb(float x) { return __builtin_ilogbf(x); }
MK_INLINE int ilogb(half x) { return __builtin_ilogbf(float(x)); }
template <class T, int N> MK_INLINE vec<int, N> ilogb(const vec<T, N>& x) {
  vec<int, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = ilogb(x[i]);
  return r;
}
MK_INLINE float modf(float x, float& ip) { return __builtin_modff(x, &ip); }
MK_INLINE half modf(half x, half& ip) {
  float fi;
  float f = __builtin_modff(float(x), &fi);
  ip = half(fi);
  return half(f);
}
// name(vector, vector& out): the scalar name(x, out) per component.
#define MK_VEC_WITH_OUT(name)                                                           \
  template <class T, int N> MK_INLINE vec<T, N> name(const vec<T, N>& x, vec<T, N>& o) { \
    vec<T, N> r;                                                                        \
    for (int i = 0; i < N; ++i) {                                                       \
      T t;                                                                              \
      r[i] = name(x[i], t);                                                             \
      o[i] = t;                                                                         \
    }                                                                                   \
    return r;                                                                           \
  }
MK_VEC_WITH_OUT(modf)
#ifdef MK_MATH_BOUNDS
MK_INLINE float sincos(float x, float& c) {
  c = _mk::op_cos::call<float>(x);
  return _mk::op_sin::call<float>(x);
}
MK_INLINE half sincos(half x, half& c) {
  c = _mk::op_cos::call<half>(x);
  return _mk::op_sin::call<half>(x);
}
#else
MK_INLINE float sincos(float x, float& c) {
  float s;
  __builtin_sincosf(x, &s, &c);
  return s;
}
MK_INLINE half sincos(half x, half& c) {
  float s, cf;
  __builtin_sincosf(float(x), &s, &cf);
  c = half(cf);
  return half(s);
}
#endif
MK_VEC_WITH_OUT(sincos)

// ---- common functions -----------------------------------------------------
MK_F1(saturate)
MK_F1(sign)
MK_F2(step)
MK_F3(mix)
MK_F3(smoothstep)

// ---- integer functions (mk/integer.h, in this namespace, with these macros)
#include "integer.h"

#undef MK_T1_ONE
#undef MK_T2_ONE
#undef MK_T3_ONE
#undef MK_GEN1
#undef MK_GEN2
#undef MK_GEN3
#undef MK_GENN
#undef MK_DEF_I1
#undef MK_DEF_I2
#undef MK_DEF_I3

} // namespace metal

// Kept for mk/math_namespaces.h (metal::fast:: in bounds mode), which
// undefines them.
#undef MK_FP_SCALARS
#undef MK_INT_SCALARS
#undef MK_F1
#undef MK_F2
#undef MK_F3

#endif // MK_MATH_H
