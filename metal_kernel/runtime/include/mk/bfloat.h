// metal-kernel: the Metal `bfloat` scalar type (MSL 3.1+), a thin class over
// clang's __bf16 (same size, alignment and bits).
//
// Why a class and not a typedef: clang refuses every conversion between
// __bf16 and _Float16 (even static_cast), while Metal allows explicit
// half <-> bfloat casts and generic kernels do them (c10's cast_to, copy
// kernels); and a class lets the conversions follow Metal's rules exactly.
//
// Metal's rules (MSL specification 3.1+, "bfloat is an extended floating
// point type that only allows implicit conversion to a type of greater
// floating point rank"): bfloat converts implicitly to float but not to half;
// integers (and bool) convert implicitly to bfloat, float and half only
// explicitly (`bfloat(x)`, `static_cast<bfloat>(x)`). So `c ? b : 1.0f` is a
// float and `c ? b : 0` a bfloat, as in Metal.
// One compromise, because bfloat is a class here and the conditional
// operator tries a class operand's conversions both ways: bfloat converts
// implicitly to bool and to every integer type *except int* (`out[i] = b`
// with a uint or bool output compiles, as in Metal), since an implicit
// bfloat -> int would make `c ? b : 0` ambiguous; `int n = b` needs
// `int(b)`. So std::is_convertible<bfloat, half/int> is false (MLX relies on
// the half one).
// Arithmetic keeps Metal's typing: bfloat op bfloat / integer -> bfloat
// (rounded at every operation), bfloat op float -> float. bfloat op half is
// computed in float (lenient: Metal rejects it).
#ifndef MK_BFLOAT_H
#define MK_BFLOAT_H

#include <type_traits>

#include "bounds.h"

namespace __mk_bf {
template <class S>
constexpr bool ok = std::is_arithmetic<S>::value || std::is_same<S, _Float16>::value || std::is_same<S, __bf16>::value;
// Sources that convert to bfloat implicitly: the integers, bool, and __bf16
// itself (the storage of bfloat vectors).
template <class S>
constexpr bool implicit_from = std::is_integral<S>::value || std::is_same<S, __bf16>::value;
template <class S> __attribute__((always_inline)) constexpr __bf16 from(const S& s) {
  if constexpr (std::is_same<S, bool>::value)
    return s ? (__bf16)1.0f : (__bf16)0.0f;
  else if constexpr (std::is_same<S, _Float16>::value)
    return (__bf16)(float)s;
  else
    return (__bf16)s;
}
template <class T> __attribute__((always_inline)) constexpr T to(__bf16 b) {
  if constexpr (std::is_same<T, __bf16>::value)
    return b;
  else if constexpr (std::is_same<T, bool>::value)
    return b != (__bf16)0.0f;
  else
    return (T)(float)b;
}
// Targets bfloat converts to implicitly (see above for why not int).
template <class T>
constexpr bool implicit_to = std::is_same<T, float>::value ||
                             (std::is_integral<T>::value && !std::is_same<T, int>::value);
// A class that converts to an arithmetic type (MLX's mask types convert to
// bool): `bfloat(mask)` takes the value through float, as Metal's builtin
// bfloat would through its standard conversions.
template <class S, class B>
constexpr bool via_float = std::is_class<S>::value && !std::is_same<S, B>::value && std::is_convertible<S, float>::value;
// operand as seen by __bf16 arithmetic: half goes through float
template <class S> __attribute__((always_inline)) constexpr auto arg(const S& s) {
  if constexpr (std::is_same<S, _Float16>::value)
    return (float)s;
  else if constexpr (std::is_same<S, bool>::value)
    return (int)s;
  else
    return s;
}
} // namespace __mk_bf

struct bfloat {
  __bf16 _b;
  bfloat() = default;
  template <class S, std::enable_if_t<__mk_bf::implicit_from<S>, int> = 0>
  __attribute__((always_inline)) constexpr bfloat(const S& s) : _b(__mk_bf::from(s)) {}
  template <class S, std::enable_if_t<__mk_bf::ok<S> && !__mk_bf::implicit_from<S>, int> = 0>
  __attribute__((always_inline)) constexpr explicit bfloat(const S& s) : _b(__mk_bf::from(s)) {}
  template <class S, std::enable_if_t<__mk_bf::via_float<S, bfloat>, int> = 0>
  __attribute__((always_inline)) constexpr explicit bfloat(const S& s) : _b(__mk_bf::from(static_cast<float>(s))) {}
  template <class S, std::enable_if_t<__mk_bf::via_float<S, bfloat>, int> = 0>
  __attribute__((always_inline)) constexpr bfloat& operator=(const S& s) {
    _b = __mk_bf::from(static_cast<float>(s));  // `scale = mask` (MLX's masked GEMM)
    return *this;
  }

  // Templates, so that each is usable only where the target is exactly T (a
  // non-template `operator float` would also convert implicitly to int,
  // half, ... through a standard conversion).
  template <class T, std::enable_if_t<__mk_bf::implicit_to<T>, int> = 0>
  __attribute__((always_inline)) constexpr operator T() const { return __mk_bf::to<T>(_b); }
  template <class T, std::enable_if_t<__mk_bf::ok<T> && !__mk_bf::implicit_to<T>, int> = 0>
  __attribute__((always_inline)) constexpr explicit operator T() const { return __mk_bf::to<T>(_b); }

  __attribute__((always_inline)) constexpr bfloat operator+() const { return *this; }
  __attribute__((always_inline)) constexpr bfloat operator-() const { return bfloat(__bf16(-_b)); }
  __attribute__((always_inline)) constexpr bfloat& operator++() { _b = __bf16(_b + (__bf16)1.0f); return *this; }
  __attribute__((always_inline)) constexpr bfloat& operator--() { _b = __bf16(_b - (__bf16)1.0f); return *this; }
  __attribute__((always_inline)) constexpr bfloat operator++(int) { bfloat t = *this; ++*this; return t; }
  __attribute__((always_inline)) constexpr bfloat operator--(int) { bfloat t = *this; --*this; return t; }

// A bfloat result of `x op y`. METAL_KERNEL_MATH=bounds (mk/bounds.h): rounded
// to nearest even or toward zero, by the draw (section 8.2 allows either).
#ifdef MK_MATH_BOUNDS
#define MK_BF_RESULT(op, x, y)                                                            \
  bfloat(::mk::bounds::round_bf(float(x) op float(y),                                     \
                                ::mk::bounds::draw(::mk::bounds::name_id(#op), (x), (y))))
#else
#define MK_BF_RESULT(op, x, y) bfloat(__bf16((x) op (y)))
#endif
#define MK_BF_ARITH(op)                                                                   \
  friend __attribute__((always_inline)) constexpr bfloat operator op(bfloat a, bfloat b) { \
    return MK_BF_RESULT(op, a._b, b._b);                                                  \
  }                                                                                       \
  template <class S, std::enable_if_t<__mk_bf::ok<S>, int> = 0>                            \
  friend __attribute__((always_inline)) constexpr auto operator op(bfloat a, const S& s) { \
    if constexpr (std::is_same<decltype(a._b op __mk_bf::arg(s)), __bf16>::value)          \
      return MK_BF_RESULT(op, a._b, __mk_bf::arg(s));                                      \
    else                                                                                  \
      return a._b op __mk_bf::arg(s);                                                     \
  }                                                                                       \
  template <class S, std::enable_if_t<__mk_bf::ok<S>, int> = 0>                            \
  friend __attribute__((always_inline)) constexpr auto operator op(const S& s, bfloat a) { \
    if constexpr (std::is_same<decltype(__mk_bf::arg(s) op a._b), __bf16>::value)          \
      return MK_BF_RESULT(op, __mk_bf::arg(s), a._b);                                      \
    else                                                                                  \
      return __mk_bf::arg(s) op a._b;                                                     \
  }                                                                                       \
  template <class S, std::enable_if_t<__mk_bf::ok<S> || std::is_same<S, bfloat>::value, int> = 0> \
  __attribute__((always_inline)) constexpr bfloat& operator op##=(const S& s) {           \
    *this = bfloat(*this op s);                                                           \
    return *this;                                                                         \
  }                                                                                       \
  /* `f += b`: one reading (the built-in candidates would be ambiguous, b   */           \
  /* converting to float and to the integer types)                          */           \
  template <class S, std::enable_if_t<__mk_bf::ok<S>, int> = 0>                            \
  friend __attribute__((always_inline)) constexpr S& operator op##=(S& s, bfloat a) {     \
    s = static_cast<S>(s op a);                                                           \
    return s;                                                                             \
  }
  MK_BF_ARITH(+)
  MK_BF_ARITH(-)
  MK_BF_ARITH(*)
  MK_BF_ARITH(/)
#undef MK_BF_ARITH
#undef MK_BF_RESULT
#define MK_BF_CMP(op)                                                                     \
  friend __attribute__((always_inline)) constexpr bool operator op(bfloat a, bfloat b) { return a._b op b._b; } \
  template <class S, std::enable_if_t<__mk_bf::ok<S>, int> = 0>                            \
  friend __attribute__((always_inline)) constexpr bool operator op(bfloat a, const S& s) { \
    return a._b op __mk_bf::arg(s);                                                       \
  }                                                                                       \
  template <class S, std::enable_if_t<__mk_bf::ok<S>, int> = 0>                            \
  friend __attribute__((always_inline)) constexpr bool operator op(const S& s, bfloat a) { \
    return __mk_bf::arg(s) op a._b;                                                       \
  }
  MK_BF_CMP(==)
  MK_BF_CMP(!=)
  MK_BF_CMP(<)
  MK_BF_CMP(<=)
  MK_BF_CMP(>)
  MK_BF_CMP(>=)
#undef MK_BF_CMP
};
static_assert(sizeof(_Float16) == 2 && sizeof(bfloat) == 2 && alignof(bfloat) == 2, "16-bit floats");
static_assert(std::is_trivially_copyable<bfloat>::value && std::is_trivially_default_constructible<bfloat>::value,
              "bfloat must stay a plain 16-bit value");
static_assert(std::is_convertible<bfloat, float>::value && !std::is_convertible<bfloat, _Float16>::value &&
                  !std::is_convertible<float, bfloat>::value && !std::is_convertible<_Float16, bfloat>::value &&
                  std::is_convertible<int, bfloat>::value && std::is_convertible<bfloat, unsigned>::value &&
                  std::is_convertible<bfloat, bool>::value && !std::is_convertible<bfloat, int>::value,
              "Metal's implicit bfloat conversions (but int, see above)");

// float/double -> bfloat conversions clang calls into compiler-rt for
#include "soft_float.h"

#endif // MK_BFLOAT_H
