// metal-kernel: Metal scalar and vector types, packed vectors, matrices,
// metal::array / array_ref, as_type and select (the type traits and
// numeric_limits are in mk/traits.h).
//
// Header-only C++17 for clang (needs -fdeclspec for the swizzle properties).
//
// Interface notes for the runtime:
//  * metal::vec<T, N> (N = 2, 3, 4) wraps a clang ext_vector_type member
//    `_v` of type `vec<T,N>::native_type` (public).  Build a vec from a native
//    vector with `vec<T,N>(metal::_mk::ntag{}, native)` or
//    `metal::_mk::from_native<T>(native)`; get it with `v._v` or
//    `metal::_mk::native(v)`.
//  * bool vectors store one byte per element (native element type
//    `unsigned char`, values 0 or 1); `v[i]` / `v.x` still yield bool.
//  * Layout equals Metal's: sizeof(float3) == 16, alignof == 16,
//    sizeof(half3) == 8, sizeof(bool3) == 4, packed_T3 is T[3].
//  * Scalars: half = _Float16, bfloat = class over __bf16 (mk/bfloat.h;
//    vectors store __bf16), long/ulong are 64-bit.
//  * bfloat conversions are IEEE round-to-nearest-even only if the compiler
//    does not use AVX512-BF16 / AVX-NE-CONVERT instructions (they flush
//    subnormal inputs to zero): build with -mno-avx512bf16 -mno-avxneconvert
//    when using -march=native.  The software path is __truncsfbf2 (bfloat.h).
//  * Vector integer `/` and `%` never trap: x / 0 == -1 (all bits set) and
//    x % 0 == x (RISC-V convention); INT_MIN / -1 == INT_MIN, INT_MIN % -1 == 0.
//    Vector shifts use the count modulo the element width (OpenCL rule).
#ifndef MK_TYPES_H
#define MK_TYPES_H

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <type_traits>

#ifndef MK_AI
#define MK_AI __attribute__((always_inline))
#endif
#ifndef MK_INLINE
#define MK_INLINE inline __attribute__((always_inline))
#endif

// ---------------------------------------------------------------------------
// Scalar types (global, as in MSL; also re-exported into namespace metal).
typedef _Float16 half;
typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;

static_assert(sizeof(long) == 8, "Metal long is 64-bit");

#include "bfloat.h"

namespace metal {
using ::bfloat;
using ::half;
using ::int16_t;
using ::int32_t;
using ::int64_t;
using ::int8_t;
using ::ptrdiff_t;
using ::size_t;
using ::uchar;
using ::uint;
using ::uint16_t;
using ::uint32_t;
using ::uint64_t;
using ::uint8_t;
using ::ulong;
using ::ushort;

template <class T, int N> struct vec;
template <class T, int N> struct packed_vec;

// ---------------------------------------------------------------------------
// Internal helpers.
namespace _mk {
struct ntag {};

template <class T> struct is_fp_scalar : std::false_type {};
template <> struct is_fp_scalar<float> : std::true_type {};
template <> struct is_fp_scalar<half> : std::true_type {};
template <> struct is_fp_scalar<bfloat> : std::true_type {};
template <> struct is_fp_scalar<double> : std::true_type {};
template <class T> constexpr bool is_fp_v = is_fp_scalar<std::remove_cv_t<T>>::value;
template <class T> constexpr bool is_int_v = std::is_integral<std::remove_cv_t<T>>::value;
template <class T> constexpr bool is_arith_v = is_fp_v<T> || is_int_v<T>;

template <class T> struct vinfo {
  static constexpr bool is_vec = false, is_packed = false;
  static constexpr int n = 1;
  typedef T elem;
};
template <class T, int N> struct vinfo<vec<T, N>> {
  static constexpr bool is_vec = true, is_packed = false;
  static constexpr int n = N;
  typedef T elem;
};
template <class T, int N> struct vinfo<packed_vec<T, N>> {
  static constexpr bool is_vec = false, is_packed = true;
  static constexpr int n = N;
  typedef T elem;
};
template <class T> using elem_t = typename vinfo<std::remove_cv_t<T>>::elem;
template <class T> constexpr bool is_vec_v = vinfo<std::remove_cv_t<T>>::is_vec;
template <class T> constexpr bool is_packed_v = vinfo<std::remove_cv_t<T>>::is_packed;

template <class T> struct storage { typedef T type; };
template <> struct storage<bool> { typedef unsigned char type; };
template <> struct storage<bfloat> { typedef __bf16 type; };
template <class T> using storage_t = typename storage<T>::type;

// Element conversion with Metal rules: x -> bool is x != 0; half <-> bfloat
// goes through float (clang refuses the direct conversion).
template <class T, class S> MK_INLINE constexpr storage_t<T> elem_cast(const S& s) {
  if constexpr (std::is_same<T, bool>::value) {
    return s != S(0) ? 1 : 0;
  } else if constexpr ((std::is_same<T, half>::value && std::is_same<S, bfloat>::value) ||
                       (std::is_same<T, bfloat>::value && std::is_same<S, half>::value)) {
    return static_cast<storage_t<T>>(static_cast<T>(static_cast<float>(s)));
  } else {
    return static_cast<storage_t<T>>(static_cast<T>(s));
  }
}

template <class T, class S>
constexpr bool splat_implicit_v = is_arith_v<S> && (!std::is_same<S, bfloat>::value || std::is_same<T, bfloat>::value);

// Number of components an argument contributes to a vector constructor
// (negative = not a scalar or vector: never sums to N).
template <class A> constexpr int ncomp() {
  typedef std::remove_cv_t<std::remove_reference_t<A>> D;
  if constexpr (is_arith_v<D>)
    return 1;
  else if constexpr (vinfo<D>::is_vec || vinfo<D>::is_packed)
    return vinfo<D>::n;
  else
    return -100;
}

template <class T, class A> MK_INLINE constexpr void put_comp(storage_t<T>* t, int& k, const A& a) {
  if constexpr (is_arith_v<A>) {
    t[k++] = elem_cast<T>(a);
  } else {
    for (int i = 0; i < vinfo<A>::n; ++i)
      t[k++] = elem_cast<T>(a[i]);
  }
}

template <class T, int N, class V, class... A> MK_INLINE constexpr V build(const A&... a) {
  storage_t<T> t[4] = {};
  int k = 0;
  (put_comp<T>(t, k, a), ...);
  if constexpr (N == 2)
    return V{t[0], t[1]};
  else if constexpr (N == 3)
    return V{t[0], t[1], t[2]};
  else
    return V{t[0], t[1], t[2], t[3]};
}

// Native element-type conversion of ext vectors.
template <class T, class U, int N, class VT, class VU> MK_INLINE constexpr VT convert_native(const VU& u) {
  if constexpr (std::is_same<T, bool>::value) {
    return __builtin_convertvector(u != (storage_t<U>)0, VT) & (storage_t<T>)1;
  } else if constexpr ((std::is_same<T, half>::value && std::is_same<U, bfloat>::value) ||
                       (std::is_same<T, bfloat>::value && std::is_same<U, half>::value)) {
    typedef float F __attribute__((ext_vector_type(N)));
    return __builtin_convertvector(__builtin_convertvector(u, F), VT);
  } else {
    return __builtin_convertvector(u, VT);
  }
}

// ---- storage classes carrying the component/swizzle properties ----------
// Named components (x y z w, r g b a) are real members overlaying the
// storage in an anonymous union, so `v.x` is an ordinary lvalue: `&v.x`,
// `float& r = v.x`, `sincos(a, c.x)`, and `idx.x += s` in a template (clang
// rejects compound assignment to a property there when an `operator+=`
// template is in scope, as in MLX's copy/binary kernels).
#define MK_COMPS_2 struct { T x, y; }; struct { T r, g; };
#define MK_COMPS_3 struct { T x, y, z; }; struct { T r, g, b; };
#define MK_COMPS_4 struct { T x, y, z, w; }; struct { T r, g, b, a; };

template <class T, int N> struct vec_storage;
#define MK_VEC_STORAGE(N)                                                               \
  template <class T> struct vec_storage<T, N> {                                         \
    typedef storage_t<T> _st;                                                           \
    typedef _st native_type __attribute__((ext_vector_type(N)));                        \
    union {                                                                             \
      native_type _v;                                                                   \
      MK_COMPS_##N                                                                      \
    };                                                                                  \
    template <int... I> MK_AI constexpr vec<T, int(sizeof...(I))> _sw() const {         \
      return vec<T, int(sizeof...(I))>(ntag{}, __builtin_shufflevector(_v, _v, I...));  \
    }                                                                                   \
    template <int... I> MK_AI constexpr void _ssw(const vec<T, int(sizeof...(I))>& a) { \
      constexpr int idx[] = {I...};                                                     \
      for (int j = 0; j < int(sizeof...(I)); ++j)                                       \
        _v[idx[j]] = a._v[j];                                                           \
    }                                                                                   \
  };
MK_VEC_STORAGE(2)
MK_VEC_STORAGE(3)
MK_VEC_STORAGE(4)
#undef MK_VEC_STORAGE

template <class T, int N> struct packed_storage;
#define MK_PACKED_STORAGE(N)                                                            \
  template <class T> struct packed_storage<T, N> {                                      \
    union {                                                                             \
      T _e[N];                                                                          \
      MK_COMPS_##N                                                                      \
    };                                                                                  \
    template <int... I> MK_AI constexpr vec<T, int(sizeof...(I))> _sw() const {         \
      return vec<T, int(sizeof...(I))>(_e[I]...);                                       \
    }                                                                                   \
    template <int... I> MK_AI constexpr void _ssw(const vec<T, int(sizeof...(I))>& a) { \
      constexpr int idx[] = {I...};                                                     \
      for (int j = 0; j < int(sizeof...(I)); ++j)                                       \
        _e[idx[j]] = a[j];                                                              \
    }                                                                                   \
  };
MK_PACKED_STORAGE(2)
MK_PACKED_STORAGE(3)
MK_PACKED_STORAGE(4)
#undef MK_PACKED_STORAGE
#undef MK_COMPS_2
#undef MK_COMPS_3
#undef MK_COMPS_4

// Multi-component swizzles are clang __declspec(property)s (needs
// -fdeclspec); they return a new vec (getter with deduced return type: the
// declared property type `int` is only a placeholder, the expression `v.xy`
// has the getter's type vec<T, 2>); the ones without repeated components also
// have a (template) setter, so `v.xy = ...`, `v.zw += 1` work.  `auto`
// getters and template setters keep class instantiation cheap (~2 ms per vec
// type).
#define MK_SR(nm, k, ...)                                                             \
  constexpr auto _get_##nm() const { return this->template _sw<__VA_ARGS__>(); } \
  __declspec(property(get = _get_##nm)) int nm;
#define MK_SW(nm, k, ...)                                                             \
  constexpr auto _get_##nm() const { return this->template _sw<__VA_ARGS__>(); } \
  template <class _X> MK_AI constexpr void _set_##nm(const _X& a) {                  \
    this->template _ssw<__VA_ARGS__>(::metal::vec<T, k>(a));                          \
  }                                                                                   \
  __declspec(property(get = _get_##nm, put = _set_##nm)) int nm;

template <class T, int N> struct vec_data;
template <class T> struct vec_data<T, 2> : vec_storage<T, 2> {
#define MK_SWZ_N 2
#include "swizzles.inc"
#undef MK_SWZ_N
};
template <class T> struct vec_data<T, 3> : vec_storage<T, 3> {
#define MK_SWZ_N 3
#include "swizzles.inc"
#undef MK_SWZ_N
};
template <class T> struct vec_data<T, 4> : vec_storage<T, 4> {
#define MK_SWZ_N 4
#include "swizzles.inc"
#undef MK_SWZ_N
};
template <class T, int N> struct packed_data;
template <class T> struct packed_data<T, 2> : packed_storage<T, 2> {
#define MK_SWZ_N 2
#include "swizzles.inc"
#undef MK_SWZ_N
};
template <class T> struct packed_data<T, 3> : packed_storage<T, 3> {
#define MK_SWZ_N 3
#include "swizzles.inc"
#undef MK_SWZ_N
};
template <class T> struct packed_data<T, 4> : packed_storage<T, 4> {
#define MK_SWZ_N 4
#include "swizzles.inc"
#undef MK_SWZ_N
};
#undef MK_SR
#undef MK_SW

// Integer helpers for vectors: no trap on division by zero / overflow.
template <class V, class S> MK_INLINE V idiv(V a, V b) {
  V z = (V)(S)0;
  auto bad = (b == z);
  if constexpr (std::is_signed<S>::value)
    bad = bad | ((a == (V)std::numeric_limits<S>::min()) & (b == (V)(S)-1));
  V bs = bad ? (V)(S)1 : b; // safe divisor
  V q = a / bs;
  // x / 0 = -1 (all ones); MIN / -1 = MIN (the wrapped result)
  return (b == z) ? (V)(S)-1 : ((bad) ? a : q);
}
template <class V, class S> MK_INLINE V imod(V a, V b) {
  V z = (V)(S)0;
  auto bad = (b == z);
  if constexpr (std::is_signed<S>::value)
    bad = bad | ((a == (V)std::numeric_limits<S>::min()) & (b == (V)(S)-1));
  V bs = bad ? (V)(S)1 : b;
  V r = a % bs;
  return (b == z) ? a : (bad ? z : r);
}
template <class V, class S> MK_INLINE V shmask(V b) { return b & (V)(S)(sizeof(S) * 8 - 1); }
} // namespace _mk

// ---------------------------------------------------------------------------
// vec<T, N>
template <class T, int N> struct vec : _mk::vec_data<T, N> {
  static_assert(N >= 2 && N <= 4, "Metal vectors have 2, 3 or 4 components");
  static_assert(_mk::is_arith_v<T>, "vector element must be a scalar arithmetic type");
  typedef _mk::vec_data<T, N> _base;
  typedef typename _mk::vec_storage<T, N>::native_type native_type;
  typedef typename _mk::vec_storage<T, N>::_st _st;
  typedef T value_type;
  static constexpr int size = N;
  using _mk::vec_storage<T, N>::_v;

  vec() = default;
  MK_AI constexpr vec(_mk::ntag, const native_type& n) : _base{{n}} {}
  // splat: float4(x), float4 v = 1.0f (implicit from the builtin scalars and
  // from T itself; from bfloat into a non-bfloat vector only explicitly, so
  // that f(float) vs f(float2) called with a bfloat is not ambiguous)
  template <class S, std::enable_if_t<_mk::splat_implicit_v<T, S>, int> = 0>
  MK_AI constexpr vec(const S& s) : _base{{(native_type)(_mk::elem_cast<T>(s))}} {}
  template <class S, std::enable_if_t<_mk::is_arith_v<S> && !_mk::splat_implicit_v<T, S>, int> = 0>
  MK_AI constexpr explicit vec(const S& s) : _base{{(native_type)(_mk::elem_cast<T>(s))}} {}
  // component-wise / mixed: float4(a, b, c, d), float4(a.xy, b, c), {1, 2}
  template <class A0, class A1, class... As,
            std::enable_if_t<(_mk::ncomp<A0>() + _mk::ncomp<A1>() + (0 + ... + _mk::ncomp<As>())) == N, int> = 0>
  MK_AI constexpr vec(const A0& a0, const A1& a1, const As&... as)
      : _base{{_mk::build<T, N, native_type>(a0, a1, as...)}} {}
  // Brace initialisation with scalars of one type initialises the first
  // components and zeroes the rest, as for Metal's (clang) vectors:
  // `uint4 v = {a, b, c}` is (a, b, c, 0), `float4 v = {x}` is (x, 0, 0, 0).
  // (`float4(a, b, c)` with parentheses stays an error, as in Metal.)
  template <class U, std::enable_if_t<_mk::is_arith_v<U>, int> = 0>
  MK_AI constexpr vec(std::initializer_list<U> l) : _base{{}} {
    int i = 0;
    for (const U& u : l)
      if (i < N) _v[i++] = _mk::elem_cast<T>(u);
  }
  // explicit element-type conversion: float4(int4), static_cast<half4>(f4)
  template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  MK_AI constexpr explicit vec(const vec<U, N>& o)
      : _base{{_mk::convert_native<T, U, N, native_type>(o._v)}} {}
  // packed <-> vec
  MK_AI constexpr vec(const packed_vec<T, N>& p) : _base{{_mk::build<T, N, native_type>(p)}} {}
  template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  MK_AI constexpr explicit vec(const packed_vec<U, N>& p) : _base{{_mk::build<T, N, native_type>(p)}} {}

  // subscript
  MK_AI T& operator[](int i) { return reinterpret_cast<T*>(this)[i]; }
  MK_AI constexpr T operator[](int i) const { return T(_v[i]); }

  // ---- element-wise operators (hidden friends: found by ADL, accept
  //      implicit scalar -> vector conversion on either side) ----
#define MK_VOP(op)                                                                      \
  friend MK_AI constexpr vec operator op(const vec& a, const vec& b) { return vec(_mk::ntag{}, a._v op b._v); }
  MK_VOP(+)
  MK_VOP(-)
  MK_VOP(*)
  MK_VOP(&)
  MK_VOP(|)
  MK_VOP(^)
#undef MK_VOP
  friend MK_AI vec operator/(const vec& a, const vec& b) {
    if constexpr (_mk::is_int_v<T>)
      return vec(_mk::ntag{}, _mk::idiv<native_type, _st>(a._v, b._v));
    else
      return vec(_mk::ntag{}, a._v / b._v);
  }
  friend MK_AI vec operator%(const vec& a, const vec& b) {
    return vec(_mk::ntag{}, _mk::imod<native_type, _st>(a._v, b._v));
  }
  friend MK_AI constexpr vec operator<<(const vec& a, const vec& b) {
    return vec(_mk::ntag{}, a._v << _mk::shmask<native_type, _st>(b._v));
  }
  friend MK_AI constexpr vec operator>>(const vec& a, const vec& b) {
    return vec(_mk::ntag{}, a._v >> _mk::shmask<native_type, _st>(b._v));
  }
#define MK_VCMP(op)                                                                     \
  friend MK_AI constexpr vec<bool, N> operator op(const vec& a, const vec& b) {          \
    return vec<bool, N>(_mk::ntag{}, __builtin_convertvector(a._v op b._v,               \
                                                             typename vec<bool, N>::native_type) & \
                                         (unsigned char)1);                               \
  }
  MK_VCMP(==)
  MK_VCMP(!=)
  MK_VCMP(<)
  MK_VCMP(<=)
  MK_VCMP(>)
  MK_VCMP(>=)
#undef MK_VCMP
  friend MK_AI constexpr vec<bool, N> operator&&(const vec& a, const vec& b) {
    return vec<bool, N>(a) & vec<bool, N>(b);
  }
  friend MK_AI constexpr vec<bool, N> operator||(const vec& a, const vec& b) {
    return vec<bool, N>(a) | vec<bool, N>(b);
  }
  friend MK_AI constexpr vec<bool, N> operator!(const vec& a) {
    if constexpr (std::is_same<T, bool>::value)
      return vec<bool, N>(_mk::ntag{}, a._v ^ (unsigned char)1);
    else
      return a == vec(T(0));
  }
  MK_AI constexpr vec operator+() const { return *this; }
  MK_AI constexpr vec operator-() const { return vec(_mk::ntag{}, -_v); }
  MK_AI constexpr vec operator~() const {
    if constexpr (std::is_same<T, bool>::value)
      return vec(_mk::ntag{}, _v ^ (unsigned char)1);
    else
      return vec(_mk::ntag{}, ~_v);
  }
  MK_AI constexpr vec& operator++() { _v += (_st)1; return *this; }
  MK_AI constexpr vec& operator--() { _v -= (_st)1; return *this; }
  MK_AI constexpr vec operator++(int) { vec t = *this; _v += (_st)1; return t; }
  MK_AI constexpr vec operator--(int) { vec t = *this; _v -= (_st)1; return t; }
#define MK_VCA(op)                                                                      \
  MK_AI constexpr vec& operator op##=(const vec& b) { *this = *this op b; return *this; }
  MK_VCA(+)
  MK_VCA(-)
  MK_VCA(*)
  MK_VCA(/)
  MK_VCA(%)
  MK_VCA(&)
  MK_VCA(|)
  MK_VCA(^)
  MK_VCA(<<)
  MK_VCA(>>)
#undef MK_VCA
};

// ---------------------------------------------------------------------------
// packed_vec<T, N>: T[N] layout (alignment of T), converts to/from vec<T, N>.
template <class T, int N> struct packed_vec : _mk::packed_data<T, N> {
  static_assert(N >= 2 && N <= 4, "Metal packed vectors have 2, 3 or 4 components");
  typedef T value_type;
  static constexpr int size = N;
  using _mk::packed_storage<T, N>::_e;

  packed_vec() = default;
  MK_AI constexpr packed_vec(const vec<T, N>& v) : _mk::packed_data<T, N>{} {
    for (int i = 0; i < N; ++i)
      _e[i] = v[i];
  }
  template <class A0, class... As,
            std::enable_if_t<!std::is_same<std::remove_cv_t<A0>, packed_vec>::value &&
                                 !std::is_same<std::remove_cv_t<A0>, vec<T, N>>::value &&
                                 std::is_constructible<vec<T, N>, const A0&, const As&...>::value,
                             int> = 0>
  MK_AI constexpr packed_vec(const A0& a0, const As&... as) : packed_vec(vec<T, N>(a0, as...)) {}

  MK_AI T& operator[](int i) { return _e[i]; }
  MK_AI constexpr const T& operator[](int i) const { return _e[i]; }

#define MK_PCA(op)                                                                      \
  MK_AI packed_vec& operator op##=(const vec<T, N>& b) { *this = vec<T, N>(*this) op b; return *this; }
  MK_PCA(+)
  MK_PCA(-)
  MK_PCA(*)
  MK_PCA(/)
  MK_PCA(%)
  MK_PCA(&)
  MK_PCA(|)
  MK_PCA(^)
  MK_PCA(<<)
  MK_PCA(>>)
#undef MK_PCA
};

// Binary operators with at least one packed operand: computed as vec.
namespace _mk {
template <class X> MK_INLINE constexpr auto unpack(const X& x) {
  if constexpr (is_packed_v<X>)
    return vec<elem_t<X>, vinfo<X>::n>(x);
  else
    return x;
}
template <class A, class B>
constexpr bool packed_op_v = (is_packed_v<A> || is_packed_v<B>) &&
                             (is_packed_v<A> || is_vec_v<A> || is_arith_v<A>) &&
                             (is_packed_v<B> || is_vec_v<B> || is_arith_v<B>);
} // namespace _mk
#define MK_POP(op)                                                                      \
  template <class A, class B, std::enable_if_t<_mk::packed_op_v<A, B>, int> = 0>         \
  MK_INLINE auto operator op(const A& a, const B& b) -> decltype(_mk::unpack(a) op _mk::unpack(b)) { \
    return _mk::unpack(a) op _mk::unpack(b);                                              \
  }
MK_POP(+)
MK_POP(-)
MK_POP(*)
MK_POP(/)
MK_POP(%)
MK_POP(&)
MK_POP(|)
MK_POP(^)
MK_POP(<<)
MK_POP(>>)
MK_POP(==)
MK_POP(!=)
MK_POP(<)
MK_POP(<=)
MK_POP(>)
MK_POP(>=)
#undef MK_POP

namespace _mk {
template <class T, int N>
MK_INLINE constexpr typename vec<T, N>::native_type native(const vec<T, N>& v) { return v._v; }
template <class T, class V> MK_INLINE constexpr auto from_native(const V& n) {
  return vec<T, int(__builtin_vectorelements(V))>(ntag{}, n);
}
} // namespace _mk

// ---------------------------------------------------------------------------
// Typedefs: float2..4, half2..4, ..., bool2..4, packed_*.
#define MK_VEC_TYPEDEFS(T, name)                                                          \
  typedef vec<T, 2> name##2;                                                              \
  typedef vec<T, 3> name##3;                                                              \
  typedef vec<T, 4> name##4;                                                              \
  typedef packed_vec<T, 2> packed_##name##2;                                              \
  typedef packed_vec<T, 3> packed_##name##3;                                              \
  typedef packed_vec<T, 4> packed_##name##4;
MK_VEC_TYPEDEFS(float, float)
MK_VEC_TYPEDEFS(half, half)
MK_VEC_TYPEDEFS(bfloat, bfloat)
MK_VEC_TYPEDEFS(int, int)
MK_VEC_TYPEDEFS(uint, uint)
MK_VEC_TYPEDEFS(short, short)
MK_VEC_TYPEDEFS(ushort, ushort)
MK_VEC_TYPEDEFS(char, char)
MK_VEC_TYPEDEFS(uchar, uchar)
MK_VEC_TYPEDEFS(long, long)
MK_VEC_TYPEDEFS(ulong, ulong)
MK_VEC_TYPEDEFS(bool, bool)
#undef MK_VEC_TYPEDEFS

// ---------------------------------------------------------------------------
// matrix<T, Cols, Rows>: column-major, columns are vec<T, Rows> (so float3x3
// is 3 x 16 bytes, as in Metal).  m[c] is column c, m[c][r] one element.
namespace _mk {
template <class... A> constexpr bool all_arith_v = (is_arith_v<A> && ...);
}
template <class T, int C, int R> struct matrix {
  static_assert(C >= 2 && C <= 4 && R >= 2 && R <= 4, "Metal matrices are 2..4 x 2..4");
  typedef vec<T, R> column_type;
  vec<T, R> columns[C];

  matrix() = default;
  // diagonal matrix: float4x4(1)
  MK_AI constexpr explicit matrix(T d) : columns{} {
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r)
        columns[c]._v[r] = (c == r) ? d : T(0);
  }
  // from C columns
  template <class... V, std::enable_if_t<sizeof...(V) == C && (std::is_convertible<V, vec<T, R>>::value && ...) &&
                                             !_mk::all_arith_v<V...>,
                                         int> = 0>
  MK_AI constexpr matrix(const V&... cols) : columns{vec<T, R>(cols)...} {}
  // from C*R scalars, column-major
  template <class... S, std::enable_if_t<sizeof...(S) == C * R && _mk::all_arith_v<S...>, int> = 0>
  MK_AI constexpr matrix(const S&... s) : columns{} {
    const T e[] = {T(s)...};
    for (int c = 0; c < C; ++c)
      for (int r = 0; r < R; ++r)
        columns[c]._v[r] = e[c * R + r];
  }
  template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
  MK_AI constexpr explicit matrix(const matrix<U, C, R>& m) : columns{} {
    for (int c = 0; c < C; ++c)
      columns[c] = vec<T, R>(m.columns[c]);
  }
  MK_AI constexpr vec<T, R>& operator[](int c) { return columns[c]; }
  MK_AI constexpr const vec<T, R>& operator[](int c) const { return columns[c]; }

  friend MK_AI constexpr matrix operator+(const matrix& a, const matrix& b) {
    matrix m;
    for (int c = 0; c < C; ++c)
      m.columns[c] = a.columns[c] + b.columns[c];
    return m;
  }
  friend MK_AI constexpr matrix operator-(const matrix& a, const matrix& b) {
    matrix m;
    for (int c = 0; c < C; ++c)
      m.columns[c] = a.columns[c] - b.columns[c];
    return m;
  }
  MK_AI constexpr matrix operator-() const {
    matrix m;
    for (int c = 0; c < C; ++c)
      m.columns[c] = -columns[c];
    return m;
  }
  friend MK_AI constexpr matrix operator*(const matrix& a, T s) {
    matrix m;
    for (int c = 0; c < C; ++c)
      m.columns[c] = a.columns[c] * s;
    return m;
  }
  friend MK_AI constexpr matrix operator*(T s, const matrix& a) { return a * s; }
  // matrix / scalar (ggml's flash attention divides a float4x4 by a float)
  friend MK_AI constexpr matrix operator/(const matrix& a, T s) {
    matrix m;
    for (int c = 0; c < C; ++c)
      m.columns[c] = a.columns[c] / s;
    return m;
  }
  // matrix * column vector
  friend MK_AI constexpr vec<T, R> operator*(const matrix& a, const vec<T, C>& v) {
    vec<T, R> r = a.columns[0] * v[0];
    for (int c = 1; c < C; ++c)
      r += a.columns[c] * v[c];
    return r;
  }
  // row vector * matrix
  friend MK_AI constexpr vec<T, C> operator*(const vec<T, R>& v, const matrix& a) {
    vec<T, C> r;
    for (int c = 0; c < C; ++c) {
      T s = T(0);
      for (int k = 0; k < R; ++k)
        s += v[k] * a.columns[c][k];
      r[c] = s;
    }
    return r;
  }
  // matrix * matrix: (C x R) * (K x C) -> (K x R)
  template <int K> friend MK_AI constexpr matrix<T, K, R> operator*(const matrix& a, const matrix<T, K, C>& b) {
    matrix<T, K, R> m;
    for (int k = 0; k < K; ++k)
      m.columns[k] = a * b.columns[k];
    return m;
  }
  MK_AI constexpr matrix& operator+=(const matrix& b) { return *this = *this + b; }
  MK_AI constexpr matrix& operator-=(const matrix& b) { return *this = *this - b; }
  MK_AI constexpr matrix& operator*=(T s) { return *this = *this * s; }
  MK_AI constexpr matrix& operator/=(T s) { return *this = *this / s; }
  MK_AI constexpr matrix& operator*=(const matrix<T, C, C>& b) { return *this = *this * b; }
};
#define MK_MAT_TYPEDEFS(T)                                                                \
  typedef matrix<T, 2, 2> T##2x2;                                                         \
  typedef matrix<T, 2, 3> T##2x3;                                                         \
  typedef matrix<T, 2, 4> T##2x4;                                                         \
  typedef matrix<T, 3, 2> T##3x2;                                                         \
  typedef matrix<T, 3, 3> T##3x3;                                                         \
  typedef matrix<T, 3, 4> T##3x4;                                                         \
  typedef matrix<T, 4, 2> T##4x2;                                                         \
  typedef matrix<T, 4, 3> T##4x3;                                                         \
  typedef matrix<T, 4, 4> T##4x4;
MK_MAT_TYPEDEFS(float)
MK_MAT_TYPEDEFS(half)
MK_MAT_TYPEDEFS(bfloat)
#undef MK_MAT_TYPEDEFS

// ---------------------------------------------------------------------------
// metal::array<T, N>: layout T[N], aggregate.
template <class T, size_t N> struct array {
  T _elems[N > 0 ? N : 1];
  MK_AI constexpr T& operator[](size_t i) { return _elems[i]; }
  MK_AI constexpr const T& operator[](size_t i) const { return _elems[i]; }
  static constexpr size_t size() { return N; }
  static constexpr bool empty() { return N == 0; }
  MK_AI constexpr T* data() { return _elems; }
  MK_AI constexpr const T* data() const { return _elems; }
  MK_AI constexpr T* begin() { return _elems; }
  MK_AI constexpr const T* begin() const { return _elems; }
  MK_AI constexpr T* end() { return _elems + N; }
  MK_AI constexpr const T* end() const { return _elems + N; }
  MK_AI constexpr T& front() { return _elems[0]; }
  MK_AI constexpr const T& front() const { return _elems[0]; }
  MK_AI constexpr T& back() { return _elems[N - 1]; }
  MK_AI constexpr const T& back() const { return _elems[N - 1]; }
};

// metal::array_ref<T>: non-owning view (pointer + size).
template <class T> struct array_ref {
  const T* _p = nullptr;
  size_t _n = 0;
  constexpr array_ref() = default;
  constexpr array_ref(const T* p, size_t n) : _p(p), _n(n) {}
  template <size_t N> constexpr array_ref(const array<T, N>& a) : _p(a.data()), _n(N) {}
  template <size_t N> constexpr array_ref(const T (&a)[N]) : _p(a), _n(N) {}
  constexpr const T& operator[](size_t i) const { return _p[i]; }
  constexpr size_t size() const { return _n; }
  constexpr bool empty() const { return _n == 0; }
  constexpr const T* data() const { return _p; }
  constexpr const T* begin() const { return _p; }
  constexpr const T* end() const { return _p + _n; }
};
template <class T> constexpr array_ref<T> make_array_ref(const T* p, size_t n) { return array_ref<T>(p, n); }
template <class T, size_t N> constexpr array_ref<T> make_array_ref(const array<T, N>& a) { return array_ref<T>(a); }

// ---------------------------------------------------------------------------
// as_type<T>(x): reinterpret the bits (sizes must match).
template <class To, class From> MK_INLINE constexpr To as_type(const From& x) {
  static_assert(sizeof(To) == sizeof(From), "as_type: source and destination sizes differ");
  return __builtin_bit_cast(To, x);
}

// select(a, b, c): c ? b : a, component-wise for vectors.
template <class T, std::enable_if_t<_mk::is_arith_v<T> || std::is_pointer<T>::value, int> = 0>
MK_INLINE constexpr T select(const T& a, const T& b, bool c) {
  return c ? b : a;
}
// mixed scalar types (lenient): select(0.0f, h, c) -> float
template <class A, class B,
          std::enable_if_t<!std::is_same<A, B>::value && _mk::is_arith_v<A> && _mk::is_arith_v<B>, int> = 0>
MK_INLINE constexpr std::common_type_t<A, B> select(const A& a, const B& b, bool c) {
  return c ? std::common_type_t<A, B>(b) : std::common_type_t<A, B>(a);
}
template <class T, int N>
MK_INLINE constexpr vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c) {
  typedef typename vec<T, N>::_st S;
  typedef std::conditional_t<sizeof(S) == 1, signed char,
                             std::conditional_t<sizeof(S) == 2, short,
                                                std::conditional_t<sizeof(S) == 4, int, long>>>
      I;
  typedef I IV __attribute__((ext_vector_type(N)));
  IV m = __builtin_convertvector(c._v, IV) != (I)0;
  return vec<T, N>(_mk::ntag{}, m ? b._v : a._v);
}
template <class T, int N>
MK_INLINE constexpr vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, bool c) {
  return c ? b : a;
}
template <class T, int N, class S, std::enable_if_t<_mk::is_arith_v<S>, int> = 0>
MK_INLINE constexpr vec<T, N> select(const vec<T, N>& a, const S& b, const vec<bool, N>& c) {
  return select(a, vec<T, N>(b), c);
}
template <class T, int N, class S, std::enable_if_t<_mk::is_arith_v<S>, int> = 0>
MK_INLINE constexpr vec<T, N> select(const S& a, const vec<T, N>& b, const vec<bool, N>& c) {
  return select(vec<T, N>(a), b, c);
}
} // namespace metal

// ---------------------------------------------------------------------------
// Global names, as MSL code uses them without `metal::`.
using metal::as_type;
#define MK_GLOBAL_VEC(name)                                                               \
  using metal::name##2;                                                                   \
  using metal::name##3;                                                                   \
  using metal::name##4;                                                                   \
  using metal::packed_##name##2;                                                          \
  using metal::packed_##name##3;                                                          \
  using metal::packed_##name##4;
MK_GLOBAL_VEC(float)
MK_GLOBAL_VEC(half)
MK_GLOBAL_VEC(bfloat)
MK_GLOBAL_VEC(int)
MK_GLOBAL_VEC(uint)
MK_GLOBAL_VEC(short)
MK_GLOBAL_VEC(ushort)
MK_GLOBAL_VEC(char)
MK_GLOBAL_VEC(uchar)
MK_GLOBAL_VEC(long)
MK_GLOBAL_VEC(ulong)
MK_GLOBAL_VEC(bool)
#undef MK_GLOBAL_VEC
#define MK_GLOBAL_MAT(T)                                                                  \
  using metal::T##2x2;                                                                    \
  using metal::T##2x3;                                                                    \
  using metal::T##2x4;                                                                    \
  using metal::T##3x2;                                                                    \
  using metal::T##3x3;                                                                    \
  using metal::T##3x4;                                                                    \
  using metal::T##4x2;                                                                    \
  using metal::T##4x3;                                                                    \
  using metal::T##4x4;
MK_GLOBAL_MAT(float)
MK_GLOBAL_MAT(half)
MK_GLOBAL_MAT(bfloat)
#undef MK_GLOBAL_MAT

#endif // MK_TYPES_H
