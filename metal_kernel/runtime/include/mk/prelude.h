// Force-included before every kernel translation unit (pass 2): the C++
// Metal standard library, the execution model, then the address-space
// qualifiers as empty macros (the CPU has one address space). Nothing may
// include a system header after those macros.
#pragma once
#include "mk/macros.h"
#include "mk/stdlib.h"
#include "mk/runtime.h"
#include "mk/simd.h"
#include "mk/simdgroup_matrix.h"
#include "mk/workitem.h"
#include "mk/builtins.h"
#include "mk/uniform.h"
#include "mk/logging.h"

#define device
// `constant` memory is read-only: as `const` it stays a distinct overload from
// `device` (c10's val_at_offs has both), which an empty macro would not.
#define constant const
#define threadgroup
#define thread
#define kernel
#define threadgroup_imageblock
#define ray_data
#define object_data
// `coherent(device)` / `coherent(system)` (a buffer whose writes other devices
// see): the CPU's memory is coherent already.
#define coherent(scope)

#include "mk/faults.h"
