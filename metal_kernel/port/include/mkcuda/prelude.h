// Force-included (precompiled) before every CUDA translation unit in pass 2:
// the runtime's execution model, then CUDA's device-side headers. Nothing
// here declares the C library's math functions: CUDA's are defined in
// math.h, on clang's builtins.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <limits>
#include <type_traits>
#include <utility>

#include "mkcuda/types.h"

// The shared headers (mk/simd.h) leave out what only Metal has.
#define MK_FRONTEND_CUDA 1

// mk/simd.h's Metal reductions name these.
namespace metal {
template <class T> inline T min(T a, T b) { return b < a ? b : a; }
template <class T> inline T max(T a, T b) { return a < b ? b : a; }
}  // namespace metal

#include "mk/runtime.h"
#include "mk/simd.h"
#include "mk/workitem.h"
#include "mk/faults.h"
#include "mkcuda/builtins.h"
#include "mkcuda/warp.h"
#include "mkcuda/fp16.h"
#include "mkcuda/atomics.h"
#include "mkcuda/math.h"
#include "mkcuda/cg.h"
#include "mkcuda/cub.h"
#include "mkcuda/abi.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __managed__
#define __constant__
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
#define __inline_hint__ inline
