// metal-kernel: metal::precise and metal::fast. As in Apple's library they
// hold single-precision functions only ("precise:: has only float
// candidates", PyTorch's UnaryKernel.metal relies on it: precise::abs(bfloat)
// converts to float unambiguously): a float overload per function, and the
// same for float vectors. Both compute as the plain functions (Table 8.1
// accuracy), except fast:: under METAL_KERNEL_MATH=bounds, which follows
// Table 8.2 (mk/bounds_fast.h).
#ifndef MK_MATH_NAMESPACES_H
#define MK_MATH_NAMESPACES_H

#include "geometric.h"
#include "math.h"
#ifdef MK_MATH_BOUNDS
#include "bounds_fast.h"
#endif

namespace metal {
namespace _mk {
template <class X> constexpr bool float_arg = std::is_same<X, float>::value;
template <int N> constexpr bool float_arg<vec<float, N>> = true;
template <int N> constexpr bool float_arg<packed_vec<float, N>> = true;
template <class... X> constexpr bool float_vec_args = (float_arg<X> && ...) && (is_vec_v<X> || ...);
}  // namespace _mk

// Functions of one, two or three floats; the float-vector forms through the
// plain function (or, in fast:: under bounds mode, the fast operation).
#define MK_NS_FN(name, n, params, args, plain, op)                                      \
  MK_INLINE float name params { return plain; }                                         \
  template <class... X, std::enable_if_t<sizeof...(X) == n && _mk::float_vec_args<X...>, int> = 0> \
  MK_INLINE auto name(const X&... x) { return op; }
#define MK_NS1(name, via) MK_NS_FN(name, 1, (float x), x, via(x), MK_NS_VEC(name, x...))
#define MK_NS2(name, via) MK_NS_FN(name, 2, (float x, float y), (x, y), via(x, y), MK_NS_VEC(name, x...))
#define MK_NS3(name, via) MK_NS_FN(name, 3, (float x, float y, float z), (x, y, z), via(x, y, z), MK_NS_VEC(name, x...))
// Functions of float vectors only (geometric) and the ones with out-parameters.
#define MK_NSV(name)                                                                    \
  template <class... X, std::enable_if_t<_mk::float_vec_args<X...>, int> = 0>            \
  MK_INLINE auto name(const X&... x) { return ::metal::name(x...); }
#define MK_NS_OTHERS                                                                    \
  MK_INLINE int ilogb(float x) { return ::metal::ilogb(x); }                            \
  MK_INLINE float frexp(float x, int& e) { return ::metal::frexp(x, e); }               \
  MK_INLINE float ldexp(float x, int k) { return ::metal::ldexp(x, k); }                \
  MK_INLINE float modf(float x, float& ip) { return ::metal::modf(x, ip); }             \
  template <int N> MK_INLINE vec<int, N> ilogb(const vec<float, N>& x) { return ::metal::ilogb(x); } \
  template <int N, class I> MK_INLINE vec<float, N> frexp(const vec<float, N>& x, vec<I, N>& e) { \
    return ::metal::frexp(x, e);                                                        \
  }                                                                                     \
  template <int N, class K> MK_INLINE auto ldexp(const vec<float, N>& x, const K& k) { return ::metal::ldexp(x, k); } \
  template <int N> MK_INLINE vec<float, N> modf(const vec<float, N>& x, vec<float, N>& ip) { return ::metal::modf(x, ip); } \
  MK_NSV(dot) MK_NSV(length) MK_NSV(length_squared) MK_NSV(distance) MK_NSV(distance_squared) \
  MK_NSV(normalize) MK_NSV(cross) MK_NSV(reflect) MK_NSV(faceforward)                   \
  template <int N, class E> MK_INLINE vec<float, N> refract(const vec<float, N>& i, const vec<float, N>& n, E eta) { \
    return ::metal::refract(i, n, eta);                                                 \
  }
// The functions whose fast:: differs under bounds mode, and the others.
#define MK_NS_BOUNDED1(M)                                                               \
  M(acos) M(acosh) M(asin) M(asinh) M(atan) M(atanh) M(cos) M(cosh) M(cospi) M(exp)      \
  M(exp2) M(exp10) M(log) M(log2) M(log10) M(rsqrt) M(sin) M(sinh) M(sinpi) M(sqrt)       \
  M(tan) M(tanh) M(tanpi)
#define MK_NS_BOUNDED2(M) M(atan2) M(divide) M(pow) M(powr)
#define MK_NS_PLAIN1(M)                                                                 \
  M(ceil) M(fabs) M(abs) M(floor) M(fract) M(logb) M(rint) M(round) M(trunc) M(saturate) M(sign)
#define MK_NS_PLAIN2(M) M(copysign) M(fdim) M(fmax) M(max) M(fmin) M(min) M(fmod) M(step) M(nextafter)
#define MK_NS_PLAIN3(M)                                                                 \
  M(fma) M(fmax3) M(max3) M(fmin3) M(min3) M(fmedian3) M(median3) M(clamp) M(mix) M(smoothstep)

#define MK_NS_VEC(name, ...) ::metal::name(__VA_ARGS__)
#define MK_PLAIN1(name) MK_NS1(name, ::metal::name)
#define MK_PLAIN2(name) MK_NS2(name, ::metal::name)
#define MK_PLAIN3(name) MK_NS3(name, ::metal::name)
namespace precise {
MK_NS_BOUNDED1(MK_PLAIN1)
MK_NS_BOUNDED2(MK_PLAIN2)
MK_NS_PLAIN1(MK_PLAIN1)
MK_NS_PLAIN2(MK_PLAIN2)
MK_NS_PLAIN3(MK_PLAIN3)
MK_NS_OTHERS
MK_INLINE float sincos(float x, float& c) { return ::metal::sincos(x, c); }
template <int N> MK_INLINE vec<float, N> sincos(const vec<float, N>& x, vec<float, N>& c) { return ::metal::sincos(x, c); }
}  // namespace precise

namespace fast {
MK_NS_PLAIN1(MK_PLAIN1)
MK_NS_PLAIN2(MK_PLAIN2)
MK_NS_PLAIN3(MK_PLAIN3)
MK_NS_OTHERS
#ifdef MK_MATH_BOUNDS
#undef MK_NS_VEC
#define MK_NS_VEC(name, ...) _mk::apply<_mk::fpres, _mk::op_fast_##name>(__VA_ARGS__)
#define MK_FAST1(name) MK_NS1(name, _mk::op_fast_##name::call<float>)
#define MK_FAST2(name) MK_NS2(name, _mk::op_fast_##name::call<float>)
MK_NS_BOUNDED1(MK_FAST1)
MK_NS_BOUNDED2(MK_FAST2)
#undef MK_FAST1
#undef MK_FAST2
MK_INLINE float sincos(float x, float& c) {
  c = _mk::op_fast_cos::call<float>(x);
  return _mk::op_fast_sin::call<float>(x);
}
MK_VEC_WITH_OUT(sincos)
#else
MK_NS_BOUNDED1(MK_PLAIN1)
MK_NS_BOUNDED2(MK_PLAIN2)
MK_INLINE float sincos(float x, float& c) { return ::metal::sincos(x, c); }
template <int N> MK_INLINE vec<float, N> sincos(const vec<float, N>& x, vec<float, N>& c) { return ::metal::sincos(x, c); }
#endif
}  // namespace fast
}  // namespace metal

#undef MK_NS_FN
#undef MK_NS1
#undef MK_NS2
#undef MK_NS3
#undef MK_NSV
#undef MK_NS_OTHERS
#undef MK_NS_BOUNDED1
#undef MK_NS_BOUNDED2
#undef MK_NS_PLAIN1
#undef MK_NS_PLAIN2
#undef MK_NS_PLAIN3
#undef MK_NS_VEC
#undef MK_PLAIN1
#undef MK_PLAIN2
#undef MK_PLAIN3
#undef MK_F1_OP
#undef MK_F2_OP
#undef MK_VEC_WITH_OUT

#endif // MK_MATH_NAMESPACES_H
