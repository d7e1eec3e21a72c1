// metal-kernel: the Metal standard library as header-only C++ (this part:
// types, math, atomics).  The runtime prelude includes this file first, then
// its own simdgroup/runtime headers, then defines the address-space macros
// (device, constant, threadgroup, thread, kernel) as empty.
#ifndef MK_STDLIB_H
#define MK_STDLIB_H
#include "macros.h"
#include "types.h"
#include "traits.h"
#include "math.h"
#include "geometric.h"
#include "math_namespaces.h"
#include "atomic.h"
#endif // MK_STDLIB_H
