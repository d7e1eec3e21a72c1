// metal-kernel: the MSL math, common, integer, relational and geometric
// function libraries, matrix transpose/determinant and <metal_pack>, in
// namespace metal (plus metal::precise and metal::fast, which here name the
// same, accurate, functions).
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

#include "traits.h"

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
MK_INLINE float f_powr(float x, float y) {
  // OpenCL/Metal powr: defined for x >= 0 only
  if (x < 0.0f || f_isnan(x) || f_isnan(y))
    return __builtin_nanf("");
  if (x == 0.0f)
    return y == 0.0f ? __builtin_nanf("") : (y < 0.0f ? __builtin_inff() : 0.0f);
  if (f_isinf(x) && y == 0.0f)
    return __builtin_nanf("");
  if (x == 1.0f && f_isinf(y))
    return __builtin_nanf("");
  return __builtin_powf(x, y);
}
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

MK_FOP1(acos, __builtin_acosf(x))
MK_FOP1(acosh, __builtin_acoshf(x))
MK_FOP1(asin, __builtin_asinf(x))
MK_FOP1(asinh, __builtin_asinhf(x))
MK_FOP1(atan, __builtin_atanf(x))
MK_FOP1(atanh, __builtin_atanhf(x))
MK_FOP1(ceil, __builtin_ceilf(x))
MK_FOP1(cos, __builtin_cosf(x))
MK_FOP1(cosh, __builtin_coshf(x))
MK_FOP1(cospi, f_cospi(x))
MK_FOP1(exp, __builtin_expf(x))
MK_FOP1(exp2, __builtin_exp2f(x))
MK_FOP1(exp10, __builtin_exp10f(x))
MK_FOP1(fabs, __builtin_fabsf(x))
MK_FOP1(floor, __builtin_floorf(x))
MK_FOP1(fract, f_fract(x))
MK_FOP1(log, __builtin_logf(x))
MK_FOP1(log2, __builtin_log2f(x))
MK_FOP1(log10, __builtin_log10f(x))
MK_FOP1(logb, __builtin_logbf(x))
MK_FOP1(rint, __builtin_roundevenf(x))
MK_FOP1(round, __builtin_roundf(x))
MK_FOP1(rsqrt, 1.0f / __builtin_sqrtf(x))
MK_FOP1(sin, __builtin_sinf(x))
MK_FOP1(sinh, __builtin_sinhf(x))
MK_FOP1(sinpi, f_sinpi(x))
MK_FOP1(sqrt, __builtin_sqrtf(x))
MK_FOP1(tan, __builtin_tanf(x))
MK_FOP1(tanh, __builtin_tanhf(x))
MK_FOP1(tanpi, f_tanpi(x))
MK_FOP1(trunc, __builtin_truncf(x))
MK_FOP1(saturate, f_clamp(x, 0.0f, 1.0f))
MK_FOP1(sign, f_sign(x))
MK_FOP2(atan2, __builtin_atan2f(x, y))
MK_FOP2(copysign, __builtin_copysignf(x, y))
MK_FOP2(divide, x / y)
MK_FOP2(fdim, __builtin_fdimf(x, y))
MK_FOP2(fmod, __builtin_fmodf(x, y))
MK_FOP2(pow, __builtin_powf(x, y))
MK_FOP2(powr, f_powr(x, y))
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

// ---- integer element operations -------------------------------------------
template <class T> using uns_t = std::make_unsigned_t<std::conditional_t<std::is_same<T, bool>::value, unsigned char, T>>;
template <class T> constexpr int bits_v = int(sizeof(T) * 8);

// |x - y| without overflow, as the unsigned type (MSL: `Tu absdiff(T, T)`).
template <class T> MK_INLINE constexpr uns_t<T> i_absdiff(T x, T y) {
  typedef uns_t<T> U;
  return x > y ? U(U(x) - U(y)) : U(U(y) - U(x));
}
template <class T> MK_INLINE constexpr T i_addsat(T x, T y) {
  T r;
  if (!__builtin_add_overflow(x, y, &r))
    return r;
  if constexpr (std::is_signed<T>::value)
    return y > 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  else
    return std::numeric_limits<T>::max();
}
template <class T> MK_INLINE constexpr T i_subsat(T x, T y) {
  T r;
  if (!__builtin_sub_overflow(x, y, &r))
    return r;
  if constexpr (std::is_signed<T>::value)
    return y < 0 ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  else
    return T(0);
}
template <class T> MK_INLINE constexpr T i_hadd(T x, T y) { return T((x >> 1) + (y >> 1) + (x & y & 1)); }
template <class T> MK_INLINE constexpr T i_rhadd(T x, T y) { return T((x >> 1) + (y >> 1) + ((x | y) & 1)); }
template <class T> MK_INLINE constexpr T i_clz(T x) {
  typedef uns_t<T> U;
  U u = U(x);
  if (u == 0)
    return T(bits_v<T>);
  return T(__builtin_clzll((unsigned long long)u) - (64 - bits_v<T>));
}
template <class T> MK_INLINE constexpr T i_ctz(T x) {
  typedef uns_t<T> U;
  U u = U(x);
  if (u == 0)
    return T(bits_v<T>);
  return T(__builtin_ctzll((unsigned long long)u));
}
template <class T> MK_INLINE constexpr T i_popcount(T x) {
  return T(__builtin_popcountll((unsigned long long)uns_t<T>(x)));
}
template <class T> MK_INLINE constexpr T i_mulhi(T x, T y) {
  if constexpr (sizeof(T) == 8) {
    typedef std::conditional_t<std::is_signed<T>::value, __int128, unsigned __int128> W;
    return T((W(x) * W(y)) >> 64);
  } else {
    typedef std::conditional_t<std::is_signed<T>::value, long, unsigned long> W;
    return T((W(x) * W(y)) >> bits_v<T>);
  }
}
// saturate(a * b + c), exact: a * b + c always fits in 128 bits.
template <class T> MK_INLINE constexpr T i_madsat(T a, T b, T c) {
  typedef std::conditional_t<std::is_signed<T>::value, __int128, unsigned __int128> W;
  const W lo = W(std::numeric_limits<T>::min()), hi = W(std::numeric_limits<T>::max());
  const W s = W(a) * W(b) + W(c);
  return T(s < lo ? lo : (s > hi ? hi : s));
}
template <class T> MK_INLINE constexpr T i_mul24(T x, T y) {
  if constexpr (std::is_signed<T>::value) {
    int a = int(uint(x) << 8) >> 8, b = int(uint(y) << 8) >> 8;
    return T(int(uint(a) * uint(b)));
  } else {
    return T((uint(x) & 0xffffffu) * (uint(y) & 0xffffffu));
  }
}
template <class T> MK_INLINE constexpr T i_rotate(T v, T i) {
  typedef uns_t<T> U;
  U u = U(v);
  int s = int(U(i) & U(bits_v<T> - 1));
  if (s == 0)
    return v;
  return T(U(U(u << s) | U(u >> (bits_v<T> - s))));
}
template <class T> MK_INLINE constexpr T i_extract_bits(T x, uint offset, uint bits) {
  typedef uns_t<T> U;
  if (bits == 0)
    return T(0);
  U u = U(U(x) >> (offset & (bits_v<T> - 1)));
  if (bits >= uint(bits_v<T>))
    return T(u);
  U mask = U((U(1) << bits) - 1);
  u &= mask;
  if constexpr (std::is_signed<T>::value) {
    U sbit = U(U(1) << (bits - 1));
    u = U((u ^ sbit) - sbit); // sign-extend
  }
  return T(u);
}
template <class T> MK_INLINE constexpr T i_insert_bits(T base, T ins, uint offset, uint bits) {
  typedef uns_t<T> U;
  if (bits == 0)
    return base;
  U mask = bits >= uint(bits_v<T>) ? U(~U(0)) : U((U(1) << bits) - 1);
  mask = U(mask << (offset & (bits_v<T> - 1)));
  return T(U((U(base) & U(~mask)) | (U(U(ins) << (offset & (bits_v<T> - 1))) & mask)));
}
template <class T> MK_INLINE constexpr T i_reverse_bits(T x) {
  typedef uns_t<T> U;
  if constexpr (sizeof(T) == 1)
    return T(__builtin_bitreverse8(U(x)));
  else if constexpr (sizeof(T) == 2)
    return T(__builtin_bitreverse16(U(x)));
  else if constexpr (sizeof(T) == 4)
    return T(__builtin_bitreverse32(U(x)));
  else
    return T(__builtin_bitreverse64(U(x)));
}

#define MK_IOP1(name)                                                                   \
  struct op_##name {                                                                    \
    template <class R, class X> static MK_AI R call(const X& x) { return i_##name<R>(R(x)); } \
  };
#define MK_IOP2(name)                                                                   \
  struct op_##name {                                                                    \
    template <class R, class X, class Y> static MK_AI R call(const X& x, const Y& y) {  \
      return i_##name<R>(R(x), R(y));                                                   \
    }                                                                                   \
  };
MK_IOP1(clz)
MK_IOP1(ctz)
MK_IOP1(popcount)
MK_IOP1(reverse_bits)
MK_IOP2(addsat)
MK_IOP2(subsat)
MK_IOP2(hadd)
MK_IOP2(rhadd)
MK_IOP2(mulhi)
MK_IOP2(mul24)
MK_IOP2(rotate)
struct op_madhi {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return R(i_mulhi<R>(R(x), R(y)) + R(z));
  }
};
struct op_mad24 {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return R(uns_t<R>(i_mul24<R>(R(x), R(y))) + uns_t<R>(R(z)));
  }
};
struct op_madsat {
  template <class R, class X, class Y, class Z> static MK_AI R call(const X& x, const Y& y, const Z& z) {
    return i_madsat<R>(R(x), R(y), R(z));
  }
};

template <class... X> constexpr bool int_args = (is_int_v<elem_t<X>> && ...);
} // namespace _mk

// ===========================================================================
// Public functions.
//
// MK_F1(name):    float/half exact overloads + generic template (FOP)
// MK_T*(name):    typed ops: float/half + all integer exact overloads
// MK_I*(name):    integer-only ops: exact overloads for every integer type
#define MK_FP_SCALARS(M) M(float) M(half)
#define MK_INT_SCALARS(M) M(char) M(signed char) M(uchar) M(short) M(ushort) M(int) M(uint) M(long) M(ulong)

#define MK_F1(name)                                                                     \
  MK_INLINE float name(float x) { return _mk::op_##name::call<float>(x); }               \
  MK_INLINE half name(half x) { return _mk::op_##name::call<half>(x); }                  \
  template <class... X, std::enable_if_t<sizeof...(X) == 1 && _mk::args_ok<X...>, int> = 0> \
  MK_INLINE auto name(const X&... x) { return _mk::apply<_mk::fpres, _mk::op_##name>(x...); }
#define MK_F2(name)                                                                     \
  MK_INLINE float name(float x, float y) { return _mk::op_##name::call<float>(x, y); }   \
  MK_INLINE half name(half x, half y) { return _mk::op_##name::call<half>(x, y); }       \
  template <class... X, std::enable_if_t<sizeof...(X) == 2 && _mk::args_ok<X...>, int> = 0> \
  MK_INLINE auto name(const X&... x) { return _mk::apply<_mk::fpres, _mk::op_##name>(x...); }
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
template <class T, int N> MK_INLINE vec<T, N> modf(const vec<T, N>& x, vec<T, N>& ip) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) {
    T t;
    r[i] = modf(x[i], t);
    ip[i] = t;
  }
  return r;
}
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
template <class T, int N> MK_INLINE vec<T, N> sincos(const vec<T, N>& x, vec<T, N>& c) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i) {
    T t;
    r[i] = sincos(x[i], t);
    c[i] = t;
  }
  return r;
}

// ---- common functions -----------------------------------------------------
MK_F1(saturate)
MK_F1(sign)
MK_F2(step)
MK_F3(mix)
MK_F3(smoothstep)

// ---- integer functions ------------------------------------------------------
#define MK_DEF_I1(name)                                                                 \
  MK_INLINE char name(char x) { return _mk::op_##name::call<char>(x); }                  \
  MK_INLINE signed char name(signed char x) { return _mk::op_##name::call<signed char>(x); } \
  MK_INLINE uchar name(uchar x) { return _mk::op_##name::call<uchar>(x); }               \
  MK_INLINE short name(short x) { return _mk::op_##name::call<short>(x); }               \
  MK_INLINE ushort name(ushort x) { return _mk::op_##name::call<ushort>(x); }            \
  MK_INLINE int name(int x) { return _mk::op_##name::call<int>(x); }                     \
  MK_INLINE uint name(uint x) { return _mk::op_##name::call<uint>(x); }                  \
  MK_INLINE long name(long x) { return _mk::op_##name::call<long>(x); }                  \
  MK_INLINE ulong name(ulong x) { return _mk::op_##name::call<ulong>(x); }               \
  MK_GENN(name, 1, _mk::int_args<X...>)
#define MK_DEF_I2(name)                                                                 \
  MK_INLINE char name(char x, char y) { return _mk::op_##name::call<char>(x, y); }       \
  MK_INLINE signed char name(signed char x, signed char y) { return _mk::op_##name::call<signed char>(x, y); } \
  MK_INLINE uchar name(uchar x, uchar y) { return _mk::op_##name::call<uchar>(x, y); }   \
  MK_INLINE short name(short x, short y) { return _mk::op_##name::call<short>(x, y); }   \
  MK_INLINE ushort name(ushort x, ushort y) { return _mk::op_##name::call<ushort>(x, y); } \
  MK_INLINE int name(int x, int y) { return _mk::op_##name::call<int>(x, y); }           \
  MK_INLINE uint name(uint x, uint y) { return _mk::op_##name::call<uint>(x, y); }       \
  MK_INLINE long name(long x, long y) { return _mk::op_##name::call<long>(x, y); }       \
  MK_INLINE ulong name(ulong x, ulong y) { return _mk::op_##name::call<ulong>(x, y); }   \
  MK_GENN(name, 2, _mk::int_args<X...>)
#define MK_DEF_I3(name)                                                                 \
  MK_INLINE char name(char x, char y, char z) { return _mk::op_##name::call<char>(x, y, z); } \
  MK_INLINE signed char name(signed char x, signed char y, signed char z) {              \
    return _mk::op_##name::call<signed char>(x, y, z);                                   \
  }                                                                                     \
  MK_INLINE uchar name(uchar x, uchar y, uchar z) { return _mk::op_##name::call<uchar>(x, y, z); } \
  MK_INLINE short name(short x, short y, short z) { return _mk::op_##name::call<short>(x, y, z); } \
  MK_INLINE ushort name(ushort x, ushort y, ushort z) { return _mk::op_##name::call<ushort>(x, y, z); } \
  MK_INLINE int name(int x, int y, int z) { return _mk::op_##name::call<int>(x, y, z); }  \
  MK_INLINE uint name(uint x, uint y, uint z) { return _mk::op_##name::call<uint>(x, y, z); } \
  MK_INLINE long name(long x, long y, long z) { return _mk::op_##name::call<long>(x, y, z); } \
  MK_INLINE ulong name(ulong x, ulong y, ulong z) { return _mk::op_##name::call<ulong>(x, y, z); } \
  MK_GENN(name, 3, _mk::int_args<X...>)
MK_DEF_I1(clz)
MK_DEF_I1(ctz)
MK_DEF_I1(popcount)
MK_DEF_I1(reverse_bits)
// absdiff returns the unsigned type: absdiff(INT_MIN, INT_MAX) == 0xffffffffu.
#define MK_ABSDIFF_ONE(T)                                                               \
  MK_INLINE _mk::uns_t<T> absdiff(T x, T y) { return _mk::i_absdiff<T>(x, y); }
MK_INT_SCALARS(MK_ABSDIFF_ONE)
#undef MK_ABSDIFF_ONE
template <class T, int N, std::enable_if_t<_mk::is_int_v<T>, int> = 0>
MK_INLINE vec<_mk::uns_t<T>, N> absdiff(const vec<T, N>& x, const vec<T, N>& y) {
  vec<_mk::uns_t<T>, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = _mk::i_absdiff<T>(x[i], y[i]);
  return r;
}
MK_DEF_I2(addsat)
MK_DEF_I2(subsat)
MK_DEF_I2(hadd)
MK_DEF_I2(rhadd)
MK_DEF_I2(mulhi)
MK_DEF_I2(rotate)
MK_DEF_I3(madhi)
MK_DEF_I3(madsat)
// mul24 / mad24: int and uint only
MK_INLINE int mul24(int x, int y) { return _mk::i_mul24<int>(x, y); }
MK_INLINE uint mul24(uint x, uint y) { return _mk::i_mul24<uint>(x, y); }
MK_INLINE int mad24(int x, int y, int z) { return _mk::op_mad24::call<int>(x, y, z); }
MK_INLINE uint mad24(uint x, uint y, uint z) { return _mk::op_mad24::call<uint>(x, y, z); }
MK_GENN(mul24, 2, _mk::int_args<X...>)
MK_GENN(mad24, 3, _mk::int_args<X...>)

// extract_bits(x, offset, bits) / insert_bits(base, insert, offset, bits)
#define MK_XB_ONE(T)                                                                    \
  MK_INLINE T extract_bits(T x, uint offset, uint bits) { return _mk::i_extract_bits<T>(x, offset, bits); } \
  MK_INLINE T insert_bits(T base, T insert, uint offset, uint bits) {                    \
    return _mk::i_insert_bits<T>(base, insert, offset, bits);                            \
  }
MK_INT_SCALARS(MK_XB_ONE)
#undef MK_XB_ONE
template <class T, int N> MK_INLINE vec<T, N> extract_bits(const vec<T, N>& x, uint offset, uint bits) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = _mk::i_extract_bits<T>(x[i], offset, bits);
  return r;
}
template <class T, int N>
MK_INLINE vec<T, N> insert_bits(const vec<T, N>& base, const vec<T, N>& ins, uint offset, uint bits) {
  vec<T, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = _mk::i_insert_bits<T>(base[i], ins[i], offset, bits);
  return r;
}

// ---- relational functions --------------------------------------------------
namespace _mk {
template <class T> MK_INLINE constexpr bool r_isnan(T x) { return x != x; }
template <class T> MK_INLINE constexpr bool r_isinf(T x) {
  float f = float(x);
  return f == __builtin_inff() || f == -__builtin_inff();
}
template <class T> MK_INLINE constexpr bool r_isfinite(T x) { return !r_isnan(x) && !r_isinf(x); }
template <class T> MK_INLINE constexpr bool r_isnormal(T x) {
  float a = __builtin_fabsf(float(x));
  return r_isfinite(x) && a >= float(numeric_limits<T>::min());
}
template <class T> MK_INLINE constexpr bool r_signbit(T x) { return __builtin_signbit(float(x)); }
template <class F, class T, int N> MK_INLINE vec<bool, N> map_bool(const vec<T, N>& x, F f) {
  vec<bool, N> r;
  for (int i = 0; i < N; ++i)
    r[i] = f(x[i]);
  return r;
}
} // namespace _mk
#define MK_REL1(name)                                                                   \
  MK_INLINE bool name(float x) { return _mk::r_##name<float>(x); }                       \
  MK_INLINE bool name(half x) { return _mk::r_##name<half>(x); }                         \
  template <class T, int N> MK_INLINE vec<bool, N> name(const vec<T, N>& x) {            \
    vec<bool, N> r;                                                                     \
    for (int i = 0; i < N; ++i)                                                         \
      r[i] = _mk::r_##name<T>(x[i]);                                                    \
    return r;                                                                           \
  }                                                                                     \
  template <class... X, std::enable_if_t<sizeof...(X) == 1 && (_mk::is_arith_v<X> && ...), int> = 0> \
  MK_INLINE bool name(const X&... x) { return (_mk::r_##name<_mk::fpres<X>>(_mk::fpres<X>(x)) && ...); }
MK_REL1(isnan)
MK_REL1(isinf)
MK_REL1(isfinite)
MK_REL1(isnormal)
MK_REL1(signbit)
#undef MK_REL1
MK_INLINE bool isordered(float x, float y) { return x == x && y == y; }
MK_INLINE bool isordered(half x, half y) { return x == x && y == y; }
MK_INLINE bool isunordered(float x, float y) { return x != x || y != y; }
MK_INLINE bool isunordered(half x, half y) { return x != x || y != y; }
template <class T, int N> MK_INLINE vec<bool, N> isordered(const vec<T, N>& x, const vec<T, N>& y) {
  return (x == x) && (y == y);
}
template <class T, int N> MK_INLINE vec<bool, N> isunordered(const vec<T, N>& x, const vec<T, N>& y) {
  return (x != x) || (y != y);
}
template <class A, class B,
          std::enable_if_t<!std::is_same<A, B>::value && _mk::is_arith_v<A> && _mk::is_arith_v<B>, int> = 0>
MK_INLINE bool isordered(const A& x, const B& y) {
  return x == x && y == y;
}
template <class A, class B,
          std::enable_if_t<!std::is_same<A, B>::value && _mk::is_arith_v<A> && _mk::is_arith_v<B>, int> = 0>
MK_INLINE bool isunordered(const A& x, const B& y) {
  return x != x || y != y;
}
MK_INLINE constexpr bool all(bool x) { return x; }
MK_INLINE constexpr bool any(bool x) { return x; }
template <class T, int N> MK_INLINE constexpr bool all(const vec<T, N>& x) {
  for (int i = 0; i < N; ++i)
    if (!(x[i] != T(0)))
      return false;
  return true;
}
template <class T, int N> MK_INLINE constexpr bool any(const vec<T, N>& x) {
  for (int i = 0; i < N; ++i)
    if (x[i] != T(0))
      return true;
  return false;
}
// `not(x)` in MSL: `not` is an operator token in C++ (`!`), so `not(v)` means
// `!v`, which is component-wise for vectors (see types.h).

// ---- geometric functions ---------------------------------------------------
namespace _mk {
template <class T, int N> MK_INLINE float g_dot(const vec<T, N>& a, const vec<T, N>& b) {
  float s = 0.0f;
  for (int i = 0; i < N; ++i)
    s += float(a[i]) * float(b[i]);
  return s;
}
template <class T, int N> MK_INLINE vec<float, N> tof(const vec<T, N>& a) { return vec<float, N>(a); }
template <int N> MK_INLINE const vec<float, N>& tof(const vec<float, N>& a) { return a; }
} // namespace _mk
template <class T, int N> MK_INLINE T dot(const vec<T, N>& a, const vec<T, N>& b) {
  if constexpr (_mk::is_fp_v<T>) {
    return T(_mk::g_dot(a, b));
  } else {
    T s = 0;
    for (int i = 0; i < N; ++i)
      s += a[i] * b[i];
    return s;
  }
}
template <class T, int N> MK_INLINE T length_squared(const vec<T, N>& x) { return T(_mk::g_dot(x, x)); }
template <class T, int N> MK_INLINE T length(const vec<T, N>& x) { return T(__builtin_sqrtf(_mk::g_dot(x, x))); }
template <class T, int N> MK_INLINE T distance_squared(const vec<T, N>& a, const vec<T, N>& b) {
  vec<float, N> d = _mk::tof(a) - _mk::tof(b);
  return T(_mk::g_dot(d, d));
}
template <class T, int N> MK_INLINE T distance(const vec<T, N>& a, const vec<T, N>& b) {
  vec<float, N> d = _mk::tof(a) - _mk::tof(b);
  return T(__builtin_sqrtf(_mk::g_dot(d, d)));
}
template <class T, int N> MK_INLINE vec<T, N> normalize(const vec<T, N>& x) {
  vec<float, N> f = _mk::tof(x);
  return vec<T, N>(f / __builtin_sqrtf(_mk::g_dot(f, f)));
}
template <class T> MK_INLINE vec<T, 3> cross(const vec<T, 3>& a, const vec<T, 3>& b) {
  vec<float, 3> x = _mk::tof(a), y = _mk::tof(b);
  return vec<T, 3>(vec<float, 3>(x.y * y.z - x.z * y.y, x.z * y.x - x.x * y.z, x.x * y.y - x.y * y.x));
}
template <class T, int N>
MK_INLINE vec<T, N> faceforward(const vec<T, N>& n, const vec<T, N>& i, const vec<T, N>& nref) {
  return _mk::g_dot(nref, i) < 0.0f ? n : -n;
}
template <class T, int N> MK_INLINE vec<T, N> reflect(const vec<T, N>& i, const vec<T, N>& n) {
  vec<float, N> fi = _mk::tof(i), fn = _mk::tof(n);
  return vec<T, N>(fi - 2.0f * _mk::g_dot(fn, fi) * fn);
}
template <class T, int N, class E, std::enable_if_t<_mk::is_arith_v<E>, int> = 0>
MK_INLINE vec<T, N> refract(const vec<T, N>& i, const vec<T, N>& n, E eta_) {
  vec<float, N> fi = _mk::tof(i), fn = _mk::tof(n);
  float eta = float(eta_);
  float d = _mk::g_dot(fn, fi);
  float k = 1.0f - eta * eta * (1.0f - d * d);
  if (k < 0.0f)
    return vec<T, N>(T(0));
  return vec<T, N>(eta * fi - (eta * d + __builtin_sqrtf(k)) * fn);
}
// matrix functions
template <class T, int C, int R> MK_INLINE matrix<T, R, C> transpose(const matrix<T, C, R>& m) {
  matrix<T, R, C> t;
  for (int c = 0; c < C; ++c)
    for (int r = 0; r < R; ++r)
      t.columns[r][c] = m.columns[c][r];
  return t;
}
template <class T> MK_INLINE T determinant(const matrix<T, 2, 2>& m) {
  return T(float(m[0][0]) * float(m[1][1]) - float(m[1][0]) * float(m[0][1]));
}
template <class T> MK_INLINE T determinant(const matrix<T, 3, 3>& m) {
  vec<float, 3> a(m[0]), b(m[1]), c(m[2]);
  return T(a.x * (b.y * c.z - c.y * b.z) - b.x * (a.y * c.z - c.y * a.z) + c.x * (a.y * b.z - b.y * a.z));
}
template <class T> MK_INLINE T determinant(const matrix<T, 4, 4>& m) {
  float a[4][4];
  for (int c = 0; c < 4; ++c)
    for (int r = 0; r < 4; ++r)
      a[c][r] = float(m[c][r]);
  float det = 0.0f;
  for (int k = 0; k < 4; ++k) {
    // cofactor expansion along column 0
    float s[3][3];
    for (int c = 1; c < 4; ++c)
      for (int r = 0, rr = 0; r < 4; ++r)
        if (r != k)
          s[c - 1][rr++] = a[c][r];
    float minor = s[0][0] * (s[1][1] * s[2][2] - s[2][1] * s[1][2]) - s[1][0] * (s[0][1] * s[2][2] - s[2][1] * s[0][2]) +
                  s[2][0] * (s[0][1] * s[1][2] - s[1][1] * s[0][2]);
    det += ((k & 1) ? -1.0f : 1.0f) * a[0][k] * minor;
  }
  return T(det);
}

// No scalar dot / length / distance / normalize: Apple's library has none,
// and libraries define their own (ggml: a scalar dot).

// ---- pack / unpack (<metal_pack>) ------------------------------------------
// Component x is in the lowest bits.  unorm: round(clamp(c, 0, 1) * (2^n-1));
// snorm: round(clamp(c, -1, 1) * (2^(n-1)-1)); round = to nearest even.
namespace _mk {
MK_INLINE uint pk_unorm(float c, float scale) { return uint(__builtin_roundevenf(f_clamp(c, 0.0f, 1.0f) * scale)); }
MK_INLINE uint pk_snorm(float c, float scale, uint mask) {
  return uint(int(__builtin_roundevenf(f_clamp(c, -1.0f, 1.0f) * scale))) & mask;
}
MK_INLINE float up_snorm(int v, float scale) { return __builtin_fmaxf(float(v) / scale, -1.0f); }
MK_INLINE float srgb_to_linear(float c) {
  return c <= 0.04045f ? c / 12.92f : __builtin_powf((c + 0.055f) / 1.055f, 2.4f);
}
MK_INLINE float linear_to_srgb(float c) {
  c = f_clamp(c, 0.0f, 1.0f);
  return c <= 0.0031308f ? c * 12.92f : 1.055f * __builtin_powf(c, 1.0f / 2.4f) - 0.055f;
}
} // namespace _mk
MK_INLINE float4 unpack_unorm4x8_to_float(uint x) {
  return float4(float(x & 0xffu), float((x >> 8) & 0xffu), float((x >> 16) & 0xffu), float(x >> 24)) / 255.0f;
}
MK_INLINE float4 unpack_snorm4x8_to_float(uint x) {
  typedef signed char sc;
  return float4(_mk::up_snorm(sc(x & 0xffu), 127.0f), _mk::up_snorm(sc((x >> 8) & 0xffu), 127.0f),
                _mk::up_snorm(sc((x >> 16) & 0xffu), 127.0f), _mk::up_snorm(sc(x >> 24), 127.0f));
}
MK_INLINE float4 unpack_unorm4x8_srgb_to_float(uint x) {
  float4 v = unpack_unorm4x8_to_float(x);
  return float4(_mk::srgb_to_linear(v.x), _mk::srgb_to_linear(v.y), _mk::srgb_to_linear(v.z), v.w);
}
MK_INLINE float2 unpack_unorm2x16_to_float(uint x) {
  return float2(float(x & 0xffffu), float(x >> 16)) / 65535.0f;
}
MK_INLINE float2 unpack_snorm2x16_to_float(uint x) {
  return float2(_mk::up_snorm(int(short(x & 0xffffu)), 32767.0f), _mk::up_snorm(int(short(x >> 16)), 32767.0f));
}
MK_INLINE float4 unpack_unorm10a2_to_float(uint x) {
  return float4(float(x & 0x3ffu) / 1023.0f, float((x >> 10) & 0x3ffu) / 1023.0f, float((x >> 20) & 0x3ffu) / 1023.0f,
                float(x >> 30) / 3.0f);
}
MK_INLINE float3 unpack_unorm565_to_float(ushort x) {
  return float3(float(x & 0x1fu) / 31.0f, float((x >> 5) & 0x3fu) / 63.0f, float(x >> 11) / 31.0f);
}
MK_INLINE half4 unpack_unorm4x8_to_half(uint x) { return half4(unpack_unorm4x8_to_float(x)); }
MK_INLINE half4 unpack_snorm4x8_to_half(uint x) { return half4(unpack_snorm4x8_to_float(x)); }
MK_INLINE half4 unpack_unorm4x8_srgb_to_half(uint x) { return half4(unpack_unorm4x8_srgb_to_float(x)); }
MK_INLINE half2 unpack_unorm2x16_to_half(uint x) { return half2(unpack_unorm2x16_to_float(x)); }
MK_INLINE half2 unpack_snorm2x16_to_half(uint x) { return half2(unpack_snorm2x16_to_float(x)); }
MK_INLINE half4 unpack_unorm10a2_to_half(uint x) { return half4(unpack_unorm10a2_to_float(x)); }
MK_INLINE half3 unpack_unorm565_to_half(ushort x) { return half3(unpack_unorm565_to_float(x)); }

MK_INLINE uint pack_float_to_unorm4x8(float4 v) {
  return _mk::pk_unorm(v.x, 255.0f) | (_mk::pk_unorm(v.y, 255.0f) << 8) | (_mk::pk_unorm(v.z, 255.0f) << 16) |
         (_mk::pk_unorm(v.w, 255.0f) << 24);
}
MK_INLINE uint pack_float_to_snorm4x8(float4 v) {
  return _mk::pk_snorm(v.x, 127.0f, 0xffu) | (_mk::pk_snorm(v.y, 127.0f, 0xffu) << 8) |
         (_mk::pk_snorm(v.z, 127.0f, 0xffu) << 16) | (_mk::pk_snorm(v.w, 127.0f, 0xffu) << 24);
}
MK_INLINE uint pack_float_to_srgb_unorm4x8(float4 v) {
  return pack_float_to_unorm4x8(float4(_mk::linear_to_srgb(v.x), _mk::linear_to_srgb(v.y), _mk::linear_to_srgb(v.z), v.w));
}
MK_INLINE uint pack_float_to_unorm2x16(float2 v) {
  return _mk::pk_unorm(v.x, 65535.0f) | (_mk::pk_unorm(v.y, 65535.0f) << 16);
}
MK_INLINE uint pack_float_to_snorm2x16(float2 v) {
  return _mk::pk_snorm(v.x, 32767.0f, 0xffffu) | (_mk::pk_snorm(v.y, 32767.0f, 0xffffu) << 16);
}
MK_INLINE uint pack_float_to_unorm10a2(float4 v) {
  return _mk::pk_unorm(v.x, 1023.0f) | (_mk::pk_unorm(v.y, 1023.0f) << 10) | (_mk::pk_unorm(v.z, 1023.0f) << 20) |
         (_mk::pk_unorm(v.w, 3.0f) << 30);
}
MK_INLINE ushort pack_float_to_unorm565(float3 v) {
  return ushort(_mk::pk_unorm(v.x, 31.0f) | (_mk::pk_unorm(v.y, 63.0f) << 5) | (_mk::pk_unorm(v.z, 31.0f) << 11));
}
MK_INLINE uint pack_half_to_unorm4x8(half4 v) { return pack_float_to_unorm4x8(float4(v)); }
MK_INLINE uint pack_half_to_snorm4x8(half4 v) { return pack_float_to_snorm4x8(float4(v)); }
MK_INLINE uint pack_half_to_srgb_unorm4x8(half4 v) { return pack_float_to_srgb_unorm4x8(float4(v)); }
MK_INLINE uint pack_half_to_unorm2x16(half2 v) { return pack_float_to_unorm2x16(float2(v)); }
MK_INLINE uint pack_half_to_snorm2x16(half2 v) { return pack_float_to_snorm2x16(float2(v)); }
MK_INLINE uint pack_half_to_unorm10a2(half4 v) { return pack_float_to_unorm10a2(float4(v)); }
MK_INLINE ushort pack_half_to_unorm565(half3 v) { return pack_float_to_unorm565(float3(v)); }

#undef MK_F1
#undef MK_F2
#undef MK_F3
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

// ---------------------------------------------------------------------------
// metal::precise:: and metal::fast:: name the same (accurate) functions.
#define MK_MATH_NAMES(M)                                                                \
  M(acos) M(acosh) M(asin) M(asinh) M(atan) M(atan2) M(atanh) M(ceil) M(copysign) M(cos) \
  M(cosh) M(cospi) M(divide) M(exp) M(exp2) M(exp10) M(fabs) M(abs) M(fdim) M(floor)     \
  M(fma) M(fmax) M(max) M(fmax3) M(max3) M(fmedian3) M(median3) M(fmin) M(min) M(fmin3)  \
  M(min3) M(fmod) M(fract) M(frexp) M(ilogb) M(ldexp) M(log) M(log2) M(log10) M(logb)    \
  M(modf) M(nextafter) M(pow) M(powr) M(rint) M(round) M(rsqrt) M(sin) M(sincos) M(sinh) \
  M(sinpi) M(sqrt) M(tan) M(tanh) M(tanpi) M(trunc) M(clamp) M(mix) M(saturate) M(sign)  \
  M(smoothstep) M(step) M(dot) M(length) M(length_squared) M(distance)                   \
  M(distance_squared) M(normalize) M(cross) M(reflect) M(refract) M(faceforward)
#define MK_USING(n) using ::metal::n;
namespace precise {
MK_MATH_NAMES(MK_USING)
}
namespace fast {
MK_MATH_NAMES(MK_USING)
}
#undef MK_USING
#undef MK_MATH_NAMES
#undef MK_FP_SCALARS
#undef MK_INT_SCALARS
} // namespace metal

#endif // MK_MATH_H
