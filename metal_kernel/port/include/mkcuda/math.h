// The CUDA math library (math_functions.h) and integer / conversion
// intrinsics. The C99 functions and their C++ float / double overloads
// (expf, exp(float), isnan(float), abs(float), std::exp ...) are the C and
// C++ libraries'; this file adds CUDA's own.
//
// Accuracy: the C library (glibc: within 1 ulp) is
// is inside CUDA's documented bounds (expf 2 ulp, tanf 4, powf 4, erff 2,
// ...). The fast intrinsics compute as the GPU's approximate instructions
// do (__expf(x) = exp2(x * log2(e)) with the product rounded first), so
// they show the same loss of accuracy for large arguments.
#pragma once
#include <stdint.h>
#include <string.h>

#include <cmath>
#include <cstdlib>

// 1/sqrt(x), rounded once (CUDA: 2 ulp).
inline float rsqrtf(float x) { return float(1.0 / __builtin_sqrt(double(x))); }
inline double rsqrt(double x) { return 1.0 / __builtin_sqrt(x); }
inline float rcbrtf(float x) { return float(1.0 / __builtin_cbrt(double(x))); }
inline float rhypotf(float x, float y) { return float(1.0 / __builtin_hypot(double(x), double(y))); }
inline float norm3df(float a, float b, float c) {
  return float(__builtin_sqrt(double(a) * a + double(b) * b + double(c) * c));
}
inline float rnorm3df(float a, float b, float c) {
  return float(1.0 / __builtin_sqrt(double(a) * a + double(b) * b + double(c) * c));
}
inline float sinpif(float x) { return float(__builtin_sin(3.14159265358979323846 * double(x))); }
inline float cospif(float x) { return float(__builtin_cos(3.14159265358979323846 * double(x))); }
inline void sincosf(float x, float* s, float* c) { *s = __builtin_sinf(x); *c = __builtin_cosf(x); }
inline void sincos(double x, double* s, double* c) { *s = __builtin_sin(x); *c = __builtin_cos(x); }
inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
inline float fdividef(float x, float y) { return x / y; }
// erfinv by Newton's method on erf, in double from a rational first guess.
inline double mk_erfinv(double y) {
  if (y <= -1.0) return y == -1.0 ? -__builtin_inf() : __builtin_nan("");
  if (y >= 1.0) return y == 1.0 ? __builtin_inf() : __builtin_nan("");
  const double w = -__builtin_log((1.0 - y) * (1.0 + y));
  double x = w < 5.0 ? y * (1.253314 + w * (0.25 + w * 0.0093)) : (y < 0 ? -1.0 : 1.0) * __builtin_sqrt(w - 0.5);
  for (int i = 0; i < 60; ++i) {
    const double step = (__builtin_erf(x) - y) / (1.1283791670955126 * __builtin_exp(-x * x));
    x -= step;
    if (__builtin_fabs(step) <= 1e-17 * __builtin_fabs(x)) break;
  }
  return x;
}
inline float erfinvf(float y) { return float(mk_erfinv(y)); }
inline double erfinv(double y) { return mk_erfinv(y); }
inline float erfcinvf(float y) { return float(mk_erfinv(1.0 - double(y))); }
inline float normcdff(float x) { return float(0.5 * __builtin_erfc(-double(x) * 0.70710678118654752440)); }
inline double normcdf(double x) { return 0.5 * __builtin_erfc(-x * 0.70710678118654752440); }
inline float normcdfinvf(float p) { return float(1.41421356237309504880 * mk_erfinv(2.0 * double(p) - 1.0)); }

// min / max as CUDA overloads them.
#define MKCUDA_MINMAX(R, A, B)                               \
  inline R min(A a, B b) { return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(a) : static_cast<R>(b); } \
  inline R max(A a, B b) { return static_cast<R>(a) < static_cast<R>(b) ? static_cast<R>(b) : static_cast<R>(a); }
MKCUDA_MINMAX(int, int, int)
MKCUDA_MINMAX(unsigned int, unsigned int, unsigned int)
MKCUDA_MINMAX(unsigned int, int, unsigned int)
MKCUDA_MINMAX(unsigned int, unsigned int, int)
MKCUDA_MINMAX(long, long, long)
MKCUDA_MINMAX(unsigned long, unsigned long, unsigned long)
MKCUDA_MINMAX(long long, long long, long long)
MKCUDA_MINMAX(unsigned long long, unsigned long long, unsigned long long)
MKCUDA_MINMAX(unsigned long long, long long, unsigned long long)
MKCUDA_MINMAX(unsigned long long, unsigned long long, long long)
#undef MKCUDA_MINMAX
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
inline double min(double a, double b) { return __builtin_fmin(a, b); }
inline double max(double a, double b) { return __builtin_fmax(a, b); }
inline double min(float a, double b) { return __builtin_fmin(a, b); }
inline double max(float a, double b) { return __builtin_fmax(a, b); }
inline double min(double a, float b) { return __builtin_fmin(a, b); }
inline double max(double a, float b) { return __builtin_fmax(a, b); }
// ---------------------------------------------------- fast intrinsics --
constexpr float MKCUDA_LOG2E = 1.44269504088896340736f;
constexpr float MKCUDA_LN2 = 0.693147180559945309417f;
constexpr float MKCUDA_LOG10_2 = 0.301029995663981195214f;
inline float __expf(float x) { return __builtin_exp2f(x * MKCUDA_LOG2E); }
inline float __exp10f(float x) { return __builtin_exp2f(x * 3.32192809488736234787f); }
inline float __logf(float x) { return __builtin_log2f(x) * MKCUDA_LN2; }
inline float __log2f(float x) { return __builtin_log2f(x); }
inline float __log10f(float x) { return __builtin_log2f(x) * MKCUDA_LOG10_2; }
inline float __powf(float x, float y) { return __builtin_exp2f(y * __builtin_log2f(x)); }
inline float __sinf(float x) { return __builtin_sinf(x); }
inline float __cosf(float x) { return __builtin_cosf(x); }
inline float __tanf(float x) { return __builtin_sinf(x) / __builtin_cosf(x); }
inline void __sincosf(float x, float* s, float* c) { *s = __builtin_sinf(x); *c = __builtin_cosf(x); }
inline float __tanhf(float x) { return __builtin_tanhf(x); }
inline float __fdividef(float x, float y) { return x / y; }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return __builtin_sqrtf(x); }
inline float __frsqrt_rn(float x) { return rsqrtf(x); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __fma_rn(double a, double b, double c) { return __builtin_fma(a, b, c); }

// ------------------------------------------------------- conversions --
// Float to integer saturates and maps NaN to 0, as the GPU's cvt does.
template <class I, class F>
inline I mk_saturate(F v) {
  if (v != v) return I(0);
  if (v <= F(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
  if (v >= F(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return I(v);
}
#define MKCUDA_F2I(F, FN, I, IN)                                                             \
  inline I __##FN##2##IN##_rn(F v) { return mk_saturate<I>(__builtin_rint(double(v))); }    \
  inline I __##FN##2##IN##_rz(F v) { return mk_saturate<I>(__builtin_trunc(double(v))); }   \
  inline I __##FN##2##IN##_rd(F v) { return mk_saturate<I>(__builtin_floor(double(v))); }   \
  inline I __##FN##2##IN##_ru(F v) { return mk_saturate<I>(__builtin_ceil(double(v))); }
MKCUDA_F2I(float, float, int, int)
MKCUDA_F2I(float, float, unsigned int, uint)
MKCUDA_F2I(float, float, long long, ll)
MKCUDA_F2I(float, float, unsigned long long, ull)
MKCUDA_F2I(double, double, int, int)
MKCUDA_F2I(double, double, unsigned int, uint)
MKCUDA_F2I(double, double, long long, ll)
MKCUDA_F2I(double, double, unsigned long long, ull)
#undef MKCUDA_F2I
inline float __int2float_rn(int v) { return float(v); }
inline float __uint2float_rn(unsigned int v) { return float(v); }
inline float __ll2float_rn(long long v) { return float(v); }
inline float __ull2float_rn(unsigned long long v) { return float(v); }
inline double __int2double_rn(int v) { return double(v); }
inline float __double2float_rn(double v) { return float(v); }
template <class To, class From>
inline To mk_bits(From v) {
  static_assert(sizeof(To) == sizeof(From), "same size");
  To r;
  memcpy(&r, &v, sizeof r);
  return r;
}
inline int __float_as_int(float v) { return mk_bits<int>(v); }
inline unsigned int __float_as_uint(float v) { return mk_bits<unsigned int>(v); }
inline float __int_as_float(int v) { return mk_bits<float>(v); }
inline float __uint_as_float(unsigned int v) { return mk_bits<float>(v); }
inline long long __double_as_longlong(double v) { return mk_bits<long long>(v); }
inline double __longlong_as_double(long long v) { return mk_bits<double>(v); }
inline int __double2hiint(double v) { return int(mk_bits<unsigned long long>(v) >> 32); }
inline int __double2loint(double v) { return int(mk_bits<unsigned long long>(v)); }
inline double __hiloint2double(int hi, int lo) {
  return mk_bits<double>((static_cast<unsigned long long>(unsigned(hi)) << 32) | unsigned(lo));
}

// ------------------------------------------------------------ integers --
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __clz(int x) { return x ? __builtin_clz(unsigned(x)) : 32; }
inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }
inline unsigned int __brev(unsigned int x) { return __builtin_bitreverse32(x); }
inline unsigned long long __brevll(unsigned long long x) { return __builtin_bitreverse64(x); }
inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  const uint64_t v = (uint64_t(y) << 32) | x;
  unsigned int r = 0;
  for (int i = 0; i < 4; ++i) r |= unsigned((v >> (((s >> (4 * i)) & 7u) * 8)) & 0xffu) << (8 * i);
  return r;
}
inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned(((uint64_t(hi) << 32 | lo) << (shift & 31u)) >> 32);
}
inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned(((uint64_t(hi) << 32 | lo) << (shift > 32u ? 32u : shift)) >> 32);
}
inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned((uint64_t(hi) << 32 | lo) >> (shift & 31u));
}
inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
  return unsigned((uint64_t(hi) << 32 | lo) >> (shift > 32u ? 32u : shift));
}
inline int __mul24(int a, int b) { return int((int64_t(a << 8) >> 8) * (int64_t(b << 8) >> 8)); }
inline unsigned int __umul24(unsigned int a, unsigned int b) { return (a & 0xffffffu) * (b & 0xffffffu); }
inline int __mulhi(int a, int b) { return int((int64_t(a) * b) >> 32); }
inline unsigned int __umulhi(unsigned int a, unsigned int b) { return unsigned((uint64_t(a) * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return (long long)((__int128(a) * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)((unsigned __int128)(a) * b >> 64);
}
inline unsigned int __sad(int a, int b, unsigned int c) { return (a > b ? unsigned(a - b) : unsigned(b - a)) + c; }
inline unsigned int __usad(unsigned int a, unsigned int b, unsigned int c) { return (a > b ? a - b : b - a) + c; }
inline int __hadd(int a, int b) { return int((int64_t(a) + b) >> 1); }
inline int __rhadd(int a, int b) { return int((int64_t(a) + b + 1) >> 1); }
inline unsigned int __uhadd(unsigned int a, unsigned int b) { return unsigned((uint64_t(a) + b) >> 1); }
inline unsigned int __urhadd(unsigned int a, unsigned int b) { return unsigned((uint64_t(a) + b + 1) >> 1); }
inline int __dp4a(int a, int b, int c) {
  int r = c;
  for (int i = 0; i < 4; ++i) r += int(int8_t(a >> (8 * i))) * int(int8_t(b >> (8 * i)));
  return r;
}
inline unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
  unsigned int r = c;
  for (int i = 0; i < 4; ++i) r += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
  return r;
}
