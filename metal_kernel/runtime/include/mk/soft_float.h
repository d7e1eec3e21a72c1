// Conversions clang calls into compiler-rt for, which the compiler-rt
// bundled with zig lacks. Included by mk/types.h (Metal) and
// mkcuda/fp16.h (CUDA).
#pragma once

// float/double -> bfloat conversion helpers.  The compiler-rt bundled with
// zig lacks them; clang calls them whenever the CPU has no native bf16
// convert (or is told not to use it), and always for double -> bfloat.
// Both round to nearest even, keep denormals, and keep NaN a (quiet) NaN.
// Weak + hidden: every kernel library gets its own copy, duplicates merge.
extern "C" {
__attribute__((weak, visibility("hidden"))) __bf16 __truncsfbf2(float f) {
  unsigned int u = __builtin_bit_cast(unsigned int, f);
  unsigned short r;
  if ((u & 0x7fffffffu) > 0x7f800000u)
    r = (unsigned short)((u >> 16) | 0x0040u);
  else
    r = (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  return __builtin_bit_cast(__bf16, r);
}
__attribute__((weak, visibility("hidden"))) __bf16 __truncdfbf2(double d) {
  // Round to odd into float (exact for the final RNE since float carries
  // more than bfloat's 8 bits + 2), then round float -> bfloat.
  float f = (float)d;
  if (f == f && (double)f != d) {
    unsigned int u = __builtin_bit_cast(unsigned int, f);
    double ad = d < 0 ? -d : d, af = f < 0 ? -(double)f : (double)f;
    if (af > ad) u -= 1; // f was rounded away from zero: step back
    u |= 1u;             // sticky bit
    f = __builtin_bit_cast(float, u);
  }
  return __truncsfbf2(f);
}
// float <-> half, for CPUs without F16C (METAL_KERNEL_MARCH=x86-64-v2):
// clang calls these there for every half conversion. Round to nearest
// even, subnormal halves kept, overflow to infinity, NaN a quiet NaN with
// its top payload bits. Where F16C exists clang uses its instructions.
__attribute__((weak, visibility("hidden"))) _Float16 __truncsfhf2(float f) {
  const unsigned int u = __builtin_bit_cast(unsigned int, f);
  const unsigned int sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  unsigned int h;
  if (a > 0x7f800000u) {
    h = sign | 0x7e00u | ((a >> 13) & 0x3ffu);  // NaN
  } else if (a >= 0x477ff000u) {
    h = sign | 0x7c00u;  // from halfway above 65504 on: infinity
  } else if (a >= 0x38800000u) {
    // A normal half: rebias the exponent (127 -> 15), round off 13 bits;
    // a carry out of the mantissa moves to the next exponent, as it should.
    const unsigned int v = a - (112u << 23);
    h = sign | ((v + 0xfffu + ((v >> 13) & 1u)) >> 13);
  } else {
    // A subnormal half (or zero): |f| in units of 2^-24, rounded to even
    // (exact scaling; 1024 units are the smallest normal half's bits).
    const float units = __builtin_bit_cast(float, a) * 16777216.0f;
    h = sign | (unsigned int)__builtin_rintf(units);
  }
  return __builtin_bit_cast(_Float16, (unsigned short)h);
}
__attribute__((weak, visibility("hidden"))) float __extendhfsf2(_Float16 x) {
  const unsigned int h = __builtin_bit_cast(unsigned short, x);
  const unsigned int sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 31) return __builtin_bit_cast(float, sign | 0x7f800000u | (m << 13));  // inf, NaN
  if (e != 0) return __builtin_bit_cast(float, sign | ((e + 112u) << 23) | (m << 13));
  const float v = (float)m * 5.9604644775390625e-8f;  // m * 2^-24, exact
  return __builtin_bit_cast(float, sign | __builtin_bit_cast(unsigned int, v));
}
// double -> half, the same way (float carries more than half's 11 bits + 2).
__attribute__((weak, visibility("hidden"))) _Float16 __truncdfhf2(double d) {
  float f = (float)d;
  if (f == f && (double)f != d) {
    unsigned int u = __builtin_bit_cast(unsigned int, f);
    double ad = d < 0 ? -d : d, af = f < 0 ? -(double)f : (double)f;
    if (af > ad) u -= 1;
    u |= 1u;
    f = __builtin_bit_cast(float, u);
  }
  return (_Float16)f;
}
}

