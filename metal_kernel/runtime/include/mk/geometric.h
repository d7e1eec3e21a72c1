// metal-kernel: the MSL relational and geometric functions, matrix
// transpose/determinant and <metal_pack>, in namespace metal.
#ifndef MK_GEOMETRIC_H
#define MK_GEOMETRIC_H

#include "math.h"

namespace metal {
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

} // namespace metal

#endif // MK_GEOMETRIC_H
