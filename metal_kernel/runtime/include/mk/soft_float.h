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

