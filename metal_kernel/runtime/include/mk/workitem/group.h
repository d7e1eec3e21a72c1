// What a per-thread function sees of its group (mk/workitem.h): the
// fiber-mode definitions of the synchronisation markers, WiGroup, and the
// accessors of buffers, threadgroup arguments and thread ids.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../abi.h"
#include "../named_sync.h"
#include "../runtime.h"
#ifdef MK_CHECK
#include "../check.h"
#endif

// ----------------------------------------------------- fiber-mode markers --
// In a build for the transform (MK_WORKITEM) the markers stay declarations:
// LLVM keeps `convergent` only on calls to functions it cannot see into (it
// drops the attribute from a body that makes no convergent call), and
// without it the optimiser duplicates barrier calls into branches. These
// bodies then get other names, and runtime/workitem.py makes the marker
// names aliases of them once the per-thread functions are cut.
//
// Builds without the transform (fiber mode) need the same protection: the
// optimiser could otherwise duplicate a simd call into both arms of a branch
// (`simd_sum(lane < n ? a : 0)`), and the scheduler would see two call sites
// and split the lanes. So the bodies have the `__mk_fiber_` names there too,
// and the marker names are bound to them by assembler aliases, which the
// optimiser cannot look through.
#define MK_MARKER(name) __mk_fiber_##name
#define MK_MARKER_ATTRS used, noinline, visibility("hidden")
#ifndef MK_WORKITEM
#define MK_MARKER_ALIAS(name) \
  ".globl __mk_" #name "\n.hidden __mk_" #name "\n.set __mk_" #name ", __mk_fiber_" #name "\n"
asm(MK_MARKER_ALIAS(sync_barrier) MK_MARKER_ALIAS(sync_simd) MK_MARKER_ALIAS(thread_index)
        MK_MARKER_ALIAS(tg_alloc));
#undef MK_MARKER_ALIAS
#endif

extern "C" {

__attribute__((MK_MARKER_ATTRS)) void MK_MARKER(sync_barrier)(uint32_t flags) {
  // The return address names the call site (the scheduler only orders by it).
  __mk_rt->threadgroup_barrier(flags, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
}

__attribute__((MK_MARKER_ATTRS)) void MK_MARKER(sync_simd)(const void* in, void* out, uint32_t arg,
                                                           uint32_t op, uint32_t, uint32_t,
                                                           void (*compute)(const mk::SimdLanes&),
                                                           void (*)(const mk::DenseLanes&)) {
  mk::SimdCall call{in, out, arg, op};
  // Lanes blocked at the same call path (this return address, the stack
  // above it) are the active lanes; the lowest of them computes.
  mk::SimdLanes* lanes =
      __mk_rt->simd_sync(&call, reinterpret_cast<uintptr_t>(__builtin_return_address(0)));
  if (lanes) compute(*lanes);
}

__attribute__((MK_MARKER_ATTRS)) uint32_t MK_MARKER(thread_index)() { return __mk_rt->thread_index(); }

__attribute__((MK_MARKER_ATTRS)) void* MK_MARKER(tg_alloc)(uint32_t slot, uint64_t size,
                                                          uint64_t align) {
  return __mk_rt->threadgroup_alloc(slot, size, align);
}

}  // extern "C"
#undef MK_MARKER
#undef MK_MARKER_ATTRS

namespace mk {

#define MK_WI_MAX_BUFFERS 64
#define MK_WI_MAX_TG_ALLOCS 64

// What a per-thread function knows about its group. Filled once per group;
// never written while the group runs, so every load from it may be repeated
// (runtime/workitem.py recomputes values derived from it instead of saving
// them). Offsets are mirrored in runtime/workitem.py.
struct WiGroup {
  u3 group_size;               // actual threads in this group, per dimension
  u3 threadgroup_position;
  u3 base;                     // threadgroup_position * threads_per_threadgroup
  u3 threads_per_threadgroup;  // the dispatched shape
  u3 threadgroups_per_grid;
  u3 threads_per_grid;
  uint32_t pad;
  void* tg_allocs[MK_WI_MAX_TG_ALLOCS];  // results of the kernel's __mk_tg_alloc calls
  void* tg_buffers[64];                  // [[threadgroup(n)]] parameters
  void* buffers[MK_WI_MAX_BUFFERS];      // [[buffer(n)]]
  void* chk;                             // checked builds: the group's chk::Group (mk/check.h)
};
static_assert(offsetof(WiGroup, group_size) == 0, "mirrored in runtime/workitem.py");
static_assert(offsetof(WiGroup, tg_allocs) == 80, "mirrored in runtime/workitem.py");
static_assert(offsetof(WiGroup, chk) == MK_WI_CHK_OFFSET, "mirrored in mk/check.h");
static_assert(sizeof(WiGroup) == 1624, "mirrored in runtime/workitem.py");

#ifdef MK_CHECK
}  // namespace mk
// Checked builds bind buffers and [[threadgroup(n)]] parameters through
// these markers, so that the instrumentation pass (check/instrument.py) sees
// which object every pointer comes from; it then replaces each call by the
// load from `g` it stands for. `const`: the optimiser may merge and hoist
// them like those loads.
extern "C" __attribute__((const, nothrow)) void* __mk_chk_buffer(const mk::WiGroup* g, uint32_t i);
extern "C" __attribute__((const, nothrow)) void* __mk_chk_tgparam(const mk::WiGroup* g, uint32_t i);
namespace mk {
#endif

template <class P>
__attribute__((always_inline)) inline P buffer_arg(const WiGroup* g, uint32_t i) {
#ifdef MK_CHECK
  return bind_address<P>(__mk_chk_buffer(g, i));
#else
  return bind_address<P>(g->buffers[i]);
#endif
}

template <class P>
__attribute__((always_inline)) inline P threadgroup_arg(const WiGroup* g, uint32_t i) {
#ifdef MK_CHECK
  return reinterpret_cast<P>(__mk_chk_tgparam(g, i));
#else
  return reinterpret_cast<P>(g->tg_buffers[i]);
#endif
}

__attribute__((always_inline)) inline ThreadIds wi_ids(const WiGroup* g, uint32_t x, uint32_t y,
                                                       uint32_t z, uint32_t lin) {
  ThreadIds t;
  t.threadgroup_position_in_grid = g->threadgroup_position;
  t.threads_per_threadgroup = g->group_size;
  t.thread_position_in_threadgroup = {x, y, z};
  t.thread_position_in_grid = {g->base.x + x, g->base.y + y, g->base.z + z};
  t.thread_index_in_threadgroup = lin;
  return t;
}

}  // namespace mk
