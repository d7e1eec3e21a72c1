// metal-kernel: preprocessor macros that the Metal compiler predefines or that
// the Metal standard library headers ship (math constants, numeric limits,
// METAL_FUNC, feature macros).
//
// This file is force-included into BOTH passes:
//   pass 1 (plain clang preprocessing of the user's MSL source, with the stub
//          headers of ../pass1/ on the include path), and
//   pass 2 (the C++ compile of the rewritten source).
// Therefore it must include NO other header and may only contain macros.
// Every macro is guarded with #ifndef so a later system header or user
// definition wins quietly.
//
// Typed constants use casts, e.g. M_PI_H is ((half)3.14...f); the casts only
// need `half`/`bfloat` to exist in pass 2, where mk/types.h defines them.
// For the half and bfloat constants, decimal -> float -> half/bfloat rounding
// gives the same value as rounding the exact constant directly (checked for
// every constant below), so the two-step cast is exact.
#ifndef MK_MACROS_H
#define MK_MACROS_H

// ---------------------------------------------------------------------------
// Feature macros the Metal compiler predefines.
// __METAL_VERSION__ and __METAL__ are passed on the command line by the runtime.
#if !defined(__METAL_VERSION__) || __METAL_VERSION__ >= 310
#ifndef __HAVE_BFLOAT__
#define __HAVE_BFLOAT__ 1
#endif
#endif
#ifndef __METAL_MACOS__
#define __METAL_MACOS__ 1
#endif

// ---------------------------------------------------------------------------
// Function / constant helpers shipped by the Metal headers.
#ifndef METAL_FUNC
#define METAL_FUNC inline __attribute__((always_inline))
#endif
#ifndef METAL_CONST
#define METAL_CONST constant
#endif

// Math modes the compiler builtins take (`__metal_exp(x, __METAL_MAYBE_FAST_MATH__)`,
// mk/builtins.h): the fast:: functions, the precise:: ones, or the plain ones.
#ifndef __METAL_PRECISE_MATH__
#define __METAL_PRECISE_MATH__ 0
#endif
#ifndef __METAL_FAST_MATH__
#define __METAL_FAST_MATH__ 1
#endif
#ifndef __METAL_MAYBE_FAST_MATH__
#define __METAL_MAYBE_FAST_MATH__ 2
#endif

// ---------------------------------------------------------------------------
// Math constants, float (MSL: "Mathematical constants", <metal_math>).
#ifndef M_E_F
#define M_E_F 2.71828182845904523536028747135266250f
#define M_LOG2E_F 1.44269504088896340735992468100189214f
#define M_LOG10E_F 0.434294481903251827651128918916605082f
#define M_LN2_F 0.693147180559945309417232121458176568f
#define M_LN10_F 2.30258509299404568401799145468436421f
#define M_PI_F 3.14159265358979323846264338327950288f
#define M_PI_2_F 1.57079632679489661923132169163975144f
#define M_PI_4_F 0.785398163397448309615660845819875721f
#define M_1_PI_F 0.318309886183790671537767526745028724f
#define M_2_PI_F 0.636619772367581343075535053490057448f
#define M_2_SQRTPI_F 1.12837916709551257389615890312154517f
#define M_SQRT2_F 1.41421356237309504880168872420969808f
#define M_SQRT1_2_F 0.707106781186547524400844362104849039f
#endif

// Same constants as half.
#ifndef M_E_H
#define M_E_H ((half)2.71828182845904523536028747135266250f)
#define M_LOG2E_H ((half)1.44269504088896340735992468100189214f)
#define M_LOG10E_H ((half)0.434294481903251827651128918916605082f)
#define M_LN2_H ((half)0.693147180559945309417232121458176568f)
#define M_LN10_H ((half)2.30258509299404568401799145468436421f)
#define M_PI_H ((half)3.14159265358979323846264338327950288f)
#define M_PI_2_H ((half)1.57079632679489661923132169163975144f)
#define M_PI_4_H ((half)0.785398163397448309615660845819875721f)
#define M_1_PI_H ((half)0.318309886183790671537767526745028724f)
#define M_2_PI_H ((half)0.636619772367581343075535053490057448f)
#define M_2_SQRTPI_H ((half)1.12837916709551257389615890312154517f)
#define M_SQRT2_H ((half)1.41421356237309504880168872420969808f)
#define M_SQRT1_2_H ((half)0.707106781186547524400844362104849039f)
#endif

// Same constants as bfloat (Metal 3.1+).
#ifndef M_E_BF
#define M_E_BF ((bfloat)2.71828182845904523536028747135266250f)
#define M_LOG2E_BF ((bfloat)1.44269504088896340735992468100189214f)
#define M_LOG10E_BF ((bfloat)0.434294481903251827651128918916605082f)
#define M_LN2_BF ((bfloat)0.693147180559945309417232121458176568f)
#define M_LN10_BF ((bfloat)2.30258509299404568401799145468436421f)
#define M_PI_BF ((bfloat)3.14159265358979323846264338327950288f)
#define M_PI_2_BF ((bfloat)1.57079632679489661923132169163975144f)
#define M_PI_4_BF ((bfloat)0.785398163397448309615660845819875721f)
#define M_1_PI_BF ((bfloat)0.318309886183790671537767526745028724f)
#define M_2_PI_BF ((bfloat)0.636619772367581343075535053490057448f)
#define M_2_SQRTPI_BF ((bfloat)1.12837916709551257389615890312154517f)
#define M_SQRT2_BF ((bfloat)1.41421356237309504880168872420969808f)
#define M_SQRT1_2_BF ((bfloat)0.707106781186547524400844362104849039f)
#endif

// ---------------------------------------------------------------------------
// Special floating-point values.
#ifndef MAXFLOAT
#define MAXFLOAT 0x1.fffffep+127f
#endif
#ifndef HUGE_VALF
#define HUGE_VALF __builtin_huge_valf()
#endif
#ifndef INFINITY
#define INFINITY __builtin_inff()
#endif
#ifndef NAN
#define NAN __builtin_nanf("")
#endif
#ifndef MAXHALF
#define MAXHALF ((half)0x1.ffcp+15f)
#endif
#ifndef HUGE_VALH
#define HUGE_VALH ((half)__builtin_huge_valf())
#endif
#ifndef MAXBFLOAT
#define MAXBFLOAT ((bfloat)0x1.fep+127f)
#endif
#ifndef HUGE_VALBF
#define HUGE_VALBF ((bfloat)__builtin_huge_valf())
#endif
// Values returned by ilogb for 0 and NaN (the CPU libm's values).
#ifndef FP_ILOGB0
#define FP_ILOGB0 (-2147483647 - 1)
#endif
#ifndef FP_ILOGBNAN
#define FP_ILOGBNAN (-2147483647 - 1)
#endif

// ---------------------------------------------------------------------------
// Floating-point limits (MSL "Numeric limits" tables).
#ifndef FLT_DIG
#define FLT_DIG 6
#endif
#ifndef FLT_MANT_DIG
#define FLT_MANT_DIG 24
#endif
#ifndef FLT_MAX_10_EXP
#define FLT_MAX_10_EXP 38
#endif
#ifndef FLT_MAX_EXP
#define FLT_MAX_EXP 128
#endif
#ifndef FLT_MIN_10_EXP
#define FLT_MIN_10_EXP (-37)
#endif
#ifndef FLT_MIN_EXP
#define FLT_MIN_EXP (-125)
#endif
#ifndef FLT_RADIX
#define FLT_RADIX 2
#endif
#ifndef FLT_MAX
#define FLT_MAX 0x1.fffffep+127f
#endif
#ifndef FLT_MIN
#define FLT_MIN 0x1p-126f
#endif
#ifndef FLT_EPSILON
#define FLT_EPSILON 0x1p-23f
#endif
#ifndef FLT_TRUE_MIN
#define FLT_TRUE_MIN 0x1p-149f
#endif
#ifndef FLT_DECIMAL_DIG
#define FLT_DECIMAL_DIG 9
#endif

#ifndef HALF_DIG
#define HALF_DIG 3
#define HALF_MANT_DIG 11
#define HALF_MAX_10_EXP 4
#define HALF_MAX_EXP 16
#define HALF_MIN_10_EXP (-4)
#define HALF_MIN_EXP (-13)
#define HALF_RADIX 2
#define HALF_MAX ((half)0x1.ffcp+15f)
#define HALF_MIN ((half)0x1p-14f)
#define HALF_EPSILON ((half)0x1p-10f)
#endif

#ifndef BFLOAT_DIG
#define BFLOAT_DIG 2
#define BFLOAT_MANT_DIG 8
#define BFLOAT_MAX_10_EXP 38
#define BFLOAT_MAX_EXP 128
#define BFLOAT_MIN_10_EXP (-37)
#define BFLOAT_MIN_EXP (-125)
#define BFLOAT_RADIX 2
#define BFLOAT_MAX ((bfloat)0x1.fep+127f)
#define BFLOAT_MIN ((bfloat)0x1p-126f)
#define BFLOAT_EPSILON ((bfloat)0x1p-7f)
#endif

// ---------------------------------------------------------------------------
// Integer limits. Metal: char 8, short 16, int 32, long 64 bits.
#ifndef CHAR_BIT
#define CHAR_BIT 8
#endif
#ifndef SCHAR_MAX
#define SCHAR_MAX 127
#endif
#ifndef SCHAR_MIN
#define SCHAR_MIN (-128)
#endif
#ifndef UCHAR_MAX
#define UCHAR_MAX 255
#endif
#ifndef CHAR_MAX
#define CHAR_MAX SCHAR_MAX
#endif
#ifndef CHAR_MIN
#define CHAR_MIN SCHAR_MIN
#endif
#ifndef USHRT_MAX
#define USHRT_MAX 65535
#endif
#ifndef SHRT_MAX
#define SHRT_MAX 32767
#endif
#ifndef SHRT_MIN
#define SHRT_MIN (-32768)
#endif
#ifndef UINT_MAX
#define UINT_MAX 0xffffffffU
#endif
#ifndef INT_MAX
#define INT_MAX 2147483647
#endif
#ifndef INT_MIN
#define INT_MIN (-2147483647 - 1)
#endif
#ifndef ULONG_MAX
#define ULONG_MAX 0xffffffffffffffffUL
#endif
#ifndef LONG_MAX
#define LONG_MAX 0x7fffffffffffffffL
#endif
#ifndef LONG_MIN
#define LONG_MIN (-0x7fffffffffffffffL - 1L)
#endif

#endif // MK_MACROS_H
