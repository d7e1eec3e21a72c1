// metal-kernel: metal::precise and metal::fast (after mk/math.h and
// mk/geometric.h, whose functions they name).
#ifndef MK_MATH_NAMESPACES_H
#define MK_MATH_NAMESPACES_H

#include "geometric.h"
#include "math.h"

namespace metal {
// ---------------------------------------------------------------------------
// metal::precise:: names the plain functions (Table 8.1 accuracy). So does
// metal::fast::, except under METAL_KERNEL_MATH=bounds, where the functions
// Table 8.2 bounds differently are its own (mk/bounds_fast.h).
#define MK_MATH_NAMES(M)                                                                \
  M(ceil) M(copysign) M(fabs) M(abs) M(fdim) M(floor)                                     \
  M(fma) M(fmax) M(max) M(fmax3) M(max3) M(fmedian3) M(median3) M(fmin) M(min) M(fmin3)  \
  M(min3) M(fmod) M(fract) M(frexp) M(ilogb) M(ldexp) M(logb)                              \
  M(modf) M(nextafter) M(rint) M(round) M(trunc) M(clamp) M(mix) M(saturate) M(sign)       \
  M(smoothstep) M(step) M(dot) M(length) M(length_squared) M(distance)                   \
  M(distance_squared) M(normalize) M(cross) M(reflect) M(refract) M(faceforward)
#define MK_FAST_MATH_NAMES(M)                                                           \
  M(acos) M(acosh) M(asin) M(asinh) M(atan) M(atan2) M(atanh) M(cos) M(cosh) M(cospi)    \
  M(divide) M(exp) M(exp2) M(exp10) M(log) M(log2) M(log10) M(pow) M(powr) M(rsqrt)       \
  M(sin) M(sincos) M(sinh) M(sinpi) M(sqrt) M(tan) M(tanh) M(tanpi)
#define MK_USING(n) using ::metal::n;
namespace precise {
MK_MATH_NAMES(MK_USING)
MK_FAST_MATH_NAMES(MK_USING)
}
namespace fast {
MK_MATH_NAMES(MK_USING)
#ifndef MK_MATH_BOUNDS
MK_FAST_MATH_NAMES(MK_USING)
#endif
}
#undef MK_USING
#undef MK_MATH_NAMES
#undef MK_FAST_MATH_NAMES
} // namespace metal

#ifdef MK_MATH_BOUNDS
#include "bounds_fast.h"
#endif
#undef MK_F1_OP
#undef MK_F2_OP
#undef MK_VEC_WITH_OUT

#endif // MK_MATH_NAMESPACES_H
