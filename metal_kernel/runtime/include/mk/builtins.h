// metal-kernel: the Apple compiler builtins that library headers call
// directly (`__metal_exp(x, __METAL_MAYBE_FAST_MATH__)`, `__metal_simd_sum(x)`,
// `__metal_get_simdgroup_size(ushort())`, ...): MLX's bf16_math.h completes
// metal:: for bfloat through them.
//
// Each builtin answers with the library function of the same name, so it
// behaves exactly as the function would (and follows METAL_KERNEL_MATH).
// The math mode argument picks the namespace: __METAL_FAST_MATH__ ->
// metal::fast, __METAL_PRECISE_MATH__ -> metal::precise, and
// __METAL_MAYBE_FAST_MATH__ (what the plain functions use) -> metal::.
// The three mode macros are in mk/macros.h, so they exist in both passes.
//
// Not provided: `__metal_get_thread_index_in_simdgroup` (only Metal 4
// tensor code uses it; it would need the thread index in every execution
// mode).
#pragma once

#include "macros.h"
#include "simd.h"
#include "stdlib.h"

#define MK_BUILTIN_MATH(name, ...)                                                      \
  template <class T>                                                                    \
  __attribute__((always_inline)) inline T __metal_##name(MK_BUILTIN_PARAMS_##__VA_ARGS__ int mode) { \
    if (mode == __METAL_FAST_MATH__)                                                    \
      return T(::metal::fast::name(MK_BUILTIN_ARGS_##__VA_ARGS__));                     \
    if (mode == __METAL_PRECISE_MATH__)                                                 \
      return T(::metal::precise::name(MK_BUILTIN_ARGS_##__VA_ARGS__));                  \
    return T(::metal::name(MK_BUILTIN_ARGS_##__VA_ARGS__));                             \
  }
#define MK_BUILTIN_PARAMS_1 T x,
#define MK_BUILTIN_ARGS_1 x
#define MK_BUILTIN_PARAMS_2 T x, T y,
#define MK_BUILTIN_ARGS_2 x, y
#define MK_BUILTIN_PARAMS_3 T x, T y, T z,
#define MK_BUILTIN_ARGS_3 x, y, z

MK_BUILTIN_MATH(acos, 1)
MK_BUILTIN_MATH(acosh, 1)
MK_BUILTIN_MATH(asin, 1)
MK_BUILTIN_MATH(asinh, 1)
MK_BUILTIN_MATH(atan, 1)
MK_BUILTIN_MATH(atanh, 1)
MK_BUILTIN_MATH(ceil, 1)
MK_BUILTIN_MATH(cos, 1)
MK_BUILTIN_MATH(cosh, 1)
MK_BUILTIN_MATH(cospi, 1)
MK_BUILTIN_MATH(exp, 1)
MK_BUILTIN_MATH(exp2, 1)
MK_BUILTIN_MATH(exp10, 1)
MK_BUILTIN_MATH(fabs, 1)
MK_BUILTIN_MATH(floor, 1)
MK_BUILTIN_MATH(fract, 1)
MK_BUILTIN_MATH(log, 1)
MK_BUILTIN_MATH(log2, 1)
MK_BUILTIN_MATH(log10, 1)
MK_BUILTIN_MATH(logb, 1)
MK_BUILTIN_MATH(rint, 1)
MK_BUILTIN_MATH(round, 1)
MK_BUILTIN_MATH(rsqrt, 1)
MK_BUILTIN_MATH(saturate, 1)
MK_BUILTIN_MATH(sign, 1)
MK_BUILTIN_MATH(sin, 1)
MK_BUILTIN_MATH(sinh, 1)
MK_BUILTIN_MATH(sinpi, 1)
MK_BUILTIN_MATH(sqrt, 1)
MK_BUILTIN_MATH(tan, 1)
MK_BUILTIN_MATH(tanh, 1)
MK_BUILTIN_MATH(tanpi, 1)
MK_BUILTIN_MATH(trunc, 1)
MK_BUILTIN_MATH(atan2, 2)
MK_BUILTIN_MATH(copysign, 2)
MK_BUILTIN_MATH(divide, 2)
MK_BUILTIN_MATH(fdim, 2)
MK_BUILTIN_MATH(fmax, 2)
MK_BUILTIN_MATH(fmin, 2)
MK_BUILTIN_MATH(fmod, 2)
MK_BUILTIN_MATH(pow, 2)
MK_BUILTIN_MATH(powr, 2)
MK_BUILTIN_MATH(fmax3, 3)
MK_BUILTIN_MATH(fmin3, 3)
MK_BUILTIN_MATH(fmedian3, 3)
#undef MK_BUILTIN_MATH
#undef MK_BUILTIN_PARAMS_1
#undef MK_BUILTIN_ARGS_1
#undef MK_BUILTIN_PARAMS_2
#undef MK_BUILTIN_ARGS_2
#undef MK_BUILTIN_PARAMS_3
#undef MK_BUILTIN_ARGS_3

// The ones without a math mode.
template <class T> __attribute__((always_inline)) inline T __metal_fma(T x, T y, T z) {
  return T(::metal::fma(x, y, z));
}
template <class T> __attribute__((always_inline)) inline T __metal_ldexp(T x, int k, int) {
  return T(::metal::ldexp(x, k));
}
template <class T> __attribute__((always_inline)) inline T __metal_frexp(T x, int* e) {
  return T(::metal::frexp(x, *e));
}
template <class T> __attribute__((always_inline)) inline T __metal_nextafter(T x, T y) {
  return T(::metal::nextafter(x, y));
}

// simdgroup functions: the builtins behind Metal's simd_* templates.
#define MK_BUILTIN_SIMD1(name)                                                          \
  template <class T> __attribute__((always_inline)) inline T __metal_##name(T x) {      \
    return ::metal::name(x);                                                            \
  }
#define MK_BUILTIN_SIMD2(name)                                                          \
  template <class T, class I> __attribute__((always_inline)) inline T __metal_##name(T x, I arg) { \
    return ::metal::name(x, arg);                                                       \
  }
MK_BUILTIN_SIMD1(simd_sum)
MK_BUILTIN_SIMD1(simd_product)
MK_BUILTIN_SIMD1(simd_min)
MK_BUILTIN_SIMD1(simd_max)
MK_BUILTIN_SIMD1(simd_prefix_inclusive_sum)
MK_BUILTIN_SIMD1(simd_prefix_exclusive_sum)
MK_BUILTIN_SIMD1(simd_prefix_inclusive_product)
MK_BUILTIN_SIMD1(simd_prefix_exclusive_product)
MK_BUILTIN_SIMD1(simd_broadcast_first)
MK_BUILTIN_SIMD2(simd_broadcast)
MK_BUILTIN_SIMD2(simd_shuffle)
MK_BUILTIN_SIMD2(simd_shuffle_up)
MK_BUILTIN_SIMD2(simd_shuffle_down)
MK_BUILTIN_SIMD2(simd_shuffle_xor)
MK_BUILTIN_SIMD2(simd_shuffle_rotate_up)
MK_BUILTIN_SIMD2(simd_shuffle_rotate_down)
#undef MK_BUILTIN_SIMD1
#undef MK_BUILTIN_SIMD2
// The bitwise reductions also take floating-point operands (MLX's bfloat
// simd_xor passes a float): they work on the bits.
#define MK_BUILTIN_SIMD_BITS(name)                                                      \
  template <class T> __attribute__((always_inline)) inline T __metal_##name(T x) {      \
    if constexpr (metal::_mk::is_fp_v<metal::_mk::elem_t<T>>) {                         \
      typedef std::conditional_t<sizeof(T) == 2, ushort, std::conditional_t<sizeof(T) == 4, uint, ulong>> B; \
      return __builtin_bit_cast(T, ::metal::name(__builtin_bit_cast(B, x)));            \
    } else {                                                                            \
      return ::metal::name(x);                                                          \
    }                                                                                   \
  }
MK_BUILTIN_SIMD_BITS(simd_and)
MK_BUILTIN_SIMD_BITS(simd_or)
MK_BUILTIN_SIMD_BITS(simd_xor)
#undef MK_BUILTIN_SIMD_BITS
template <class T, class I>
__attribute__((always_inline)) inline T __metal_simd_shuffle_and_fill_up(T x, T fill, I delta, uint32_t modulo) {
  return ::metal::simd_shuffle_and_fill_up(x, fill, delta, modulo);
}
template <class T, class I>
__attribute__((always_inline)) inline T __metal_simd_shuffle_and_fill_down(T x, T fill, I delta, uint32_t modulo) {
  return ::metal::simd_shuffle_and_fill_down(x, fill, delta, modulo);
}
// The argument only carries the result type: `__metal_get_simdgroup_size(ushort())`.
template <class T> __attribute__((always_inline)) constexpr T __metal_get_simdgroup_size(T) { return T(32); }
