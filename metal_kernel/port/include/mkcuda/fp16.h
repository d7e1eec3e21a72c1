// cuda_fp16.h and cuda_bf16.h: __half, __half2, __nv_bfloat16,
// __nv_bfloat162 with CUDA's conversions and arithmetic. Every operation
// rounds to nearest even once, as the GPU's half and bfloat16 instructions
// do (arithmetic goes through double, where the exact result of an add or
// multiply of two halves fits, so only the final conversion rounds).
#pragma once
#include <stdint.h>
#include <string.h>

#include "mk/soft_float.h"

namespace mk {
namespace cuda {

// Rounds `f` to the 16-bit format toward zero / down / up: round to
// nearest even, then step back when that went the wrong way.
template <class N>
inline N round_directed(float f, int dir) {  // dir: 0 toward zero, -1 down, +1 up
  N r = static_cast<N>(f);
  const float back = static_cast<float>(r);
  if (back != back || back == f) return r;
  const bool too_far = dir == 0 ? __builtin_fabsf(back) > __builtin_fabsf(f) : (dir < 0 ? back > f : back < f);
  if (!too_far) return r;
  uint16_t bits;
  memcpy(&bits, &r, 2);
  // One step toward f: smaller in magnitude when r went past f away from
  // zero, else larger; from a zero, the smallest subnormal of f's sign.
  if (bits & 0x7fffu) {
    const bool shrink = __builtin_fabsf(back) > __builtin_fabsf(f);
    bits = shrink ? uint16_t(bits - 1) : uint16_t(bits + 1);
  } else {
    bits = uint16_t(f < 0 ? 0x8001u : 0x0001u);
  }
  memcpy(&r, &bits, 2);
  return r;
}

}  // namespace cuda
}  // namespace mk

struct __half_raw {
  unsigned short x;
};
struct __nv_bfloat16_raw {
  unsigned short x;
};

// One 16-bit float type over clang's native one (N = _Float16 or __bf16).
#define MKCUDA_HALF_TYPE(NAME, N, RAW)                                                                 \
  struct __attribute__((aligned(2))) NAME {                                                            \
    unsigned short __x;                                                                                \
    NAME() = default;                                                                                  \
    constexpr NAME(const RAW& r) : __x(r.x) {}                                                         \
    static NAME from_native(N v) {                                                                     \
      NAME h;                                                                                          \
      memcpy(&h.__x, &v, 2);                                                                           \
      return h;                                                                                        \
    }                                                                                                  \
    N native() const {                                                                                 \
      N v;                                                                                             \
      memcpy(&v, &__x, 2);                                                                             \
      return v;                                                                                        \
    }                                                                                                  \
    NAME(float f) : NAME(from_native(static_cast<N>(f))) {}                                            \
    NAME(double d) : NAME(from_native(static_cast<N>(d))) {}                                           \
    NAME(int v) : NAME(from_native(static_cast<N>(static_cast<float>(v)))) {}                         \
    NAME(unsigned int v) : NAME(from_native(static_cast<N>(static_cast<float>(v)))) {}                \
    NAME(short v) : NAME(from_native(static_cast<N>(static_cast<float>(v)))) {}                       \
    NAME(unsigned short v) : NAME(from_native(static_cast<N>(static_cast<float>(v)))) {}              \
    NAME(long long v) : NAME(from_native(static_cast<N>(static_cast<float>(v)))) {}                   \
    NAME(unsigned long long v) : NAME(from_native(static_cast<N>(static_cast<float>(v)))) {}          \
    operator float() const { return static_cast<float>(native()); }                                   \
    operator RAW() const { return RAW{__x}; }                                                          \
    explicit operator bool() const { return static_cast<float>(native()) != 0.0f; }                   \
    NAME& operator=(float f) { return *this = NAME(f); }                                               \
    NAME& operator=(double d) { return *this = NAME(d); }                                              \
    NAME& operator+=(const NAME& o) { return *this = NAME(double(float(*this)) + double(float(o))); }                 \
    NAME& operator-=(const NAME& o) { return *this = NAME(double(float(*this)) - double(float(o))); }                 \
    NAME& operator*=(const NAME& o) { return *this = NAME(double(float(*this)) * double(float(o))); }                 \
    NAME& operator/=(const NAME& o) { return *this = NAME(double(float(*this)) / double(float(o))); }                 \
    NAME& operator++() { return *this += NAME(1.0f); }                                                 \
    NAME& operator--() { return *this -= NAME(1.0f); }                                                 \
  };                                                                                                   \
  inline NAME operator+(const NAME& a, const NAME& b) { return NAME(double(float(a)) + double(float(b))); }           \
  inline NAME operator-(const NAME& a, const NAME& b) { return NAME(double(float(a)) - double(float(b))); }           \
  inline NAME operator*(const NAME& a, const NAME& b) { return NAME(double(float(a)) * double(float(b))); }           \
  inline NAME operator/(const NAME& a, const NAME& b) { return NAME(double(float(a)) / double(float(b))); }           \
  inline NAME operator-(const NAME& a) { return NAME::from_native(-a.native()); }                     \
  inline NAME operator+(const NAME& a) { return a; }                                                  \
  inline bool operator==(const NAME& a, const NAME& b) { return float(a) == float(b); }               \
  inline bool operator!=(const NAME& a, const NAME& b) { return float(a) != float(b); }               \
  inline bool operator<(const NAME& a, const NAME& b) { return float(a) < float(b); }                 \
  inline bool operator<=(const NAME& a, const NAME& b) { return float(a) <= float(b); }               \
  inline bool operator>(const NAME& a, const NAME& b) { return float(a) > float(b); }                 \
  inline bool operator>=(const NAME& a, const NAME& b) { return float(a) >= float(b); }

MKCUDA_HALF_TYPE(__half, _Float16, __half_raw)
MKCUDA_HALF_TYPE(__nv_bfloat16, __bf16, __nv_bfloat16_raw)
#undef MKCUDA_HALF_TYPE

// The pairs, elementwise.
#define MKCUDA_PAIR_TYPE(NAME, E)                                                                      \
  struct __attribute__((aligned(4))) NAME {                                                            \
    E x, y;                                                                                            \
    NAME() = default;                                                                                  \
    constexpr NAME(const E& a, const E& b) : x(a), y(b) {}                                             \
    NAME& operator+=(const NAME& o) { return *this = NAME(x + o.x, y + o.y); }                        \
    NAME& operator-=(const NAME& o) { return *this = NAME(x - o.x, y - o.y); }                        \
    NAME& operator*=(const NAME& o) { return *this = NAME(x * o.x, y * o.y); }                        \
    NAME& operator/=(const NAME& o) { return *this = NAME(x / o.x, y / o.y); }                        \
  };                                                                                                   \
  inline NAME operator+(const NAME& a, const NAME& b) { return NAME(a.x + b.x, a.y + b.y); }          \
  inline NAME operator-(const NAME& a, const NAME& b) { return NAME(a.x - b.x, a.y - b.y); }          \
  inline NAME operator*(const NAME& a, const NAME& b) { return NAME(a.x * b.x, a.y * b.y); }          \
  inline NAME operator/(const NAME& a, const NAME& b) { return NAME(a.x / b.x, a.y / b.y); }          \
  inline NAME operator-(const NAME& a) { return NAME(-a.x, -a.y); }                                   \
  inline bool operator==(const NAME& a, const NAME& b) { return a.x == b.x && a.y == b.y; }           \
  inline bool operator!=(const NAME& a, const NAME& b) { return !(a == b); }

MKCUDA_PAIR_TYPE(__half2, __half)
MKCUDA_PAIR_TYPE(__nv_bfloat162, __nv_bfloat16)
#undef MKCUDA_PAIR_TYPE

typedef __half half;
typedef __half2 half2;
typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;
static_assert(sizeof(__half) == 2 && sizeof(__half2) == 4 && sizeof(__nv_bfloat162) == 4, "CUDA layouts");

// ------------------------------------------------------------ conversions --
#define MKCUDA_FROM_FLOAT(H, NAME, N)                                                              \
  inline H NAME##_rn(float f) { return H(f); }                                                     \
  inline H NAME(float f) { return H(f); }                                                          \
  inline H NAME##_rz(float f) { return H::from_native(::mk::cuda::round_directed<N>(f, 0)); }      \
  inline H NAME##_rd(float f) { return H::from_native(::mk::cuda::round_directed<N>(f, -1)); }     \
  inline H NAME##_ru(float f) { return H::from_native(::mk::cuda::round_directed<N>(f, 1)); }
MKCUDA_FROM_FLOAT(__half, __float2half, _Float16)
MKCUDA_FROM_FLOAT(__nv_bfloat16, __float2bfloat16, __bf16)
#undef MKCUDA_FROM_FLOAT

inline float __half2float(__half h) { return float(h); }
inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
inline __half __double2half(double d) { return __half(d); }
inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
inline float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
inline __nv_bfloat162 __float2bfloat162_rn(float f) { return __nv_bfloat162(f, f); }
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
  return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
inline __nv_bfloat162 __float22bfloat162_rn(float2 f) {
  return __nv_bfloat162(__nv_bfloat16(f.x), __nv_bfloat16(f.y));
}
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{float(h.x), float(h.y)}; }

#define MKCUDA_PAIR_PARTS(H, H2, SUFFIX)                                                   \
  inline H __low2##SUFFIX(H2 a) { return a.x; }                                            \
  inline H __high2##SUFFIX(H2 a) { return a.y; }                                           \
  inline float __low2float(H2 a) { return float(a.x); }                                    \
  inline float __high2float(H2 a) { return float(a.y); }                                   \
  inline H2 __halves2##SUFFIX##2(H a, H b) { return H2(a, b); }                            \
  inline H2 __##SUFFIX##2##SUFFIX##2(H a) { return H2(a, a); }                             \
  inline H2 __lows2##SUFFIX##2(H2 a, H2 b) { return H2(a.x, b.x); }                        \
  inline H2 __highs2##SUFFIX##2(H2 a, H2 b) { return H2(a.y, b.y); }                       \
  inline H2 __low2##SUFFIX##2(H2 a) { return H2(a.x, a.x); }                               \
  inline H2 __high2##SUFFIX##2(H2 a) { return H2(a.y, a.y); }                              \
  inline H2 __lowhigh2highlow(H2 a) { return H2(a.y, a.x); }
MKCUDA_PAIR_PARTS(__half, __half2, half)
MKCUDA_PAIR_PARTS(__nv_bfloat16, __nv_bfloat162, bfloat16)
#undef MKCUDA_PAIR_PARTS

#define MKCUDA_INT_CONVERSIONS(H, SUFFIX)                                                                  \
  inline H __int2##SUFFIX##_rn(int v) { return H(float(v)); }                                              \
  inline H __uint2##SUFFIX##_rn(unsigned int v) { return H(float(v)); }                                    \
  inline H __short2##SUFFIX##_rn(short v) { return H(float(v)); }                                          \
  inline H __ushort2##SUFFIX##_rn(unsigned short v) { return H(float(v)); }                                \
  inline H __ll2##SUFFIX##_rn(long long v) { return H(float(v)); }                                         \
  inline int __##SUFFIX##2int_rn(H h) { return int(__builtin_rintf(float(h))); }                           \
  inline int __##SUFFIX##2int_rz(H h) { return int(float(h)); }                                            \
  inline int __##SUFFIX##2int_rd(H h) { return int(__builtin_floorf(float(h))); }                          \
  inline int __##SUFFIX##2int_ru(H h) { return int(__builtin_ceilf(float(h))); }                           \
  inline short __##SUFFIX##_as_short(H h) { return short(h.__x); }                                         \
  inline unsigned short __##SUFFIX##_as_ushort(H h) { return h.__x; }                                      \
  inline H __short_as_##SUFFIX(short v) { H h; h.__x = (unsigned short)v; return h; }                      \
  inline H __ushort_as_##SUFFIX(unsigned short v) { H h; h.__x = v; return h; }
MKCUDA_INT_CONVERSIONS(__half, half)
MKCUDA_INT_CONVERSIONS(__nv_bfloat16, bfloat16)
#undef MKCUDA_INT_CONVERSIONS

// ------------------------------------------------------------- arithmetic --
// Math on a 16-bit float: in float, rounded once.
#define MKCUDA_H_MATH(H, NAME, F) \
  inline H NAME(H a) { return H(F(float(a))); }
#define MKCUDA_SCALAR_OPS(H)                                                                          \
  inline H __hadd(H a, H b) { return a + b; }                                                         \
  inline H __hsub(H a, H b) { return a - b; }                                                         \
  inline H __hmul(H a, H b) { return a * b; }                                                         \
  inline H __hdiv(H a, H b) { return a / b; }                                                         \
  inline H __hadd_rn(H a, H b) { return a + b; }                                                      \
  inline H __hsub_rn(H a, H b) { return a - b; }                                                      \
  inline H __hmul_rn(H a, H b) { return a * b; }                                                      \
  inline H __hfma(H a, H b, H c) { return H(__builtin_fma(double(float(a)), double(float(b)), double(float(c)))); } \
  inline H __hneg(H a) { return -a; }                                                                 \
  inline H __habs(H a) { H r = a; r.__x &= 0x7fffu; return r; }                                       \
  inline H __hadd_sat(H a, H b) { float r = float(a + b); return H(r < 0.f ? 0.f : (r > 1.f ? 1.f : r)); } \
  inline H __hmul_sat(H a, H b) { float r = float(a * b); return H(r < 0.f ? 0.f : (r > 1.f ? 1.f : r)); } \
  inline H __hfma_relu(H a, H b, H c) { H r = __hfma(a, b, c); return float(r) < 0.f ? H(0.f) : r; }  \
  inline bool __hisnan(H a) { return float(a) != float(a); }                                          \
  inline int __hisinf(H a) { float f = float(a); return f == __builtin_inff() ? 1 : (f == -__builtin_inff() ? -1 : 0); } \
  inline H __hmax(H a, H b) { return __hisnan(a) ? b : (__hisnan(b) ? a : (a < b ? b : a)); }         \
  inline H __hmin(H a, H b) { return __hisnan(a) ? b : (__hisnan(b) ? a : (b < a ? b : a)); }         \
  inline H __hmax_nan(H a, H b) { return __hisnan(a) ? a : (__hisnan(b) ? b : (a < b ? b : a)); }     \
  inline H __hmin_nan(H a, H b) { return __hisnan(a) ? a : (__hisnan(b) ? b : (b < a ? b : a)); }     \
  inline bool __heq(H a, H b) { return a == b; }                                                      \
  inline bool __hne(H a, H b) { return a != b && !__hisnan(a) && !__hisnan(b); }                      \
  inline bool __hlt(H a, H b) { return a < b; }                                                       \
  inline bool __hle(H a, H b) { return a <= b; }                                                      \
  inline bool __hgt(H a, H b) { return a > b; }                                                       \
  inline bool __hge(H a, H b) { return a >= b; }                                                      \
  MKCUDA_H_MATH(H, hsqrt, __builtin_sqrtf) \
  inline H hrsqrt(H a) { return H(float(1.0 / __builtin_sqrt(double(float(a))))); }                   \
  inline H hrcp(H a) { return H(1.0f / float(a)); }                                                   \
  MKCUDA_H_MATH(H, hexp, __builtin_expf) \
  MKCUDA_H_MATH(H, hexp2, __builtin_exp2f) \
  MKCUDA_H_MATH(H, hexp10, __builtin_exp10f) \
  MKCUDA_H_MATH(H, hlog, __builtin_logf) \
  MKCUDA_H_MATH(H, hlog2, __builtin_log2f) \
  MKCUDA_H_MATH(H, hlog10, __builtin_log10f) \
  MKCUDA_H_MATH(H, hsin, __builtin_sinf) \
  MKCUDA_H_MATH(H, hcos, __builtin_cosf) \
  MKCUDA_H_MATH(H, htanh, __builtin_tanhf) \
  MKCUDA_H_MATH(H, hfloor, __builtin_floorf) \
  MKCUDA_H_MATH(H, hceil, __builtin_ceilf) \
  MKCUDA_H_MATH(H, htrunc, __builtin_truncf) \
  MKCUDA_H_MATH(H, hrint, __builtin_rintf)
MKCUDA_SCALAR_OPS(__half)
MKCUDA_SCALAR_OPS(__nv_bfloat16)
#undef MKCUDA_SCALAR_OPS
#undef MKCUDA_H_MATH

#define MKCUDA_PAIR_OPS(H2)                                                                       \
  inline H2 __hadd2(H2 a, H2 b) { return H2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }                \
  inline H2 __hsub2(H2 a, H2 b) { return H2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }                \
  inline H2 __hmul2(H2 a, H2 b) { return H2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }                \
  inline H2 __h2div(H2 a, H2 b) { return H2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }                \
  inline H2 __hfma2(H2 a, H2 b, H2 c) { return H2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  inline H2 __hneg2(H2 a) { return H2(__hneg(a.x), __hneg(a.y)); }                                \
  inline H2 __habs2(H2 a) { return H2(__habs(a.x), __habs(a.y)); }                                \
  inline H2 __hmax2(H2 a, H2 b) { return H2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }                \
  inline H2 __hmin2(H2 a, H2 b) { return H2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }                \
  inline H2 __hadd2_sat(H2 a, H2 b) { return H2(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); }    \
  inline H2 h2sqrt(H2 a) { return H2(hsqrt(a.x), hsqrt(a.y)); }                                   \
  inline H2 h2exp(H2 a) { return H2(hexp(a.x), hexp(a.y)); }                                      \
  inline H2 h2log(H2 a) { return H2(hlog(a.x), hlog(a.y)); }                                      \
  inline H2 h2rcp(H2 a) { return H2(hrcp(a.x), hrcp(a.y)); }                                      \
  inline H2 h2rsqrt(H2 a) { return H2(hrsqrt(a.x), hrsqrt(a.y)); }                                \
  inline bool __hbeq2(H2 a, H2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }                  \
  inline bool __hblt2(H2 a, H2 b) { return __hlt(a.x, b.x) && __hlt(a.y, b.y); }
MKCUDA_PAIR_OPS(__half2)
MKCUDA_PAIR_OPS(__nv_bfloat162)
#undef MKCUDA_PAIR_OPS
