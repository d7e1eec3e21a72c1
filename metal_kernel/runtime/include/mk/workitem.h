// Work-item loops: kernels with barriers or simdgroup functions run as one
// loop over the threads of a group per region between synchronisation
// points, instead of one fiber per thread (the approach of PoCL).
//
// The rewriter emits, next to each kernel's entry point, a per-thread
// function `__mk_wi_<n>(g, x, y, z, lin)` that runs the kernel as thread
// (x, y, z) of the group described by `g`. Compiled to optimised LLVM IR,
// its synchronising calls are direct calls to the marker functions below;
// runtime/workitem.py cuts it there into resumable step functions (values
// live across a cut go to per-thread context arrays) and generates, per
// kernel, a loop function `loop(…, b, e, resume)` that runs threads [b, e)
// from one resume point to their next synchronisation point, and an entry
// point `__mk_wientry_<n>` that hands both to `__mk_wi_run_group` below.
//
// Its parts, in the order they build on each other (mk/workitem/):
//   - group.h: the fiber-mode definitions of the markers (what every other
//     caller — the direct-mode entry points, functions the transform could
//     not cut — gets: they call the fiber scheduler in the runtime library),
//     and WiGroup, what a per-thread function reads about its group;
//   and only in builds for the transform (MK_WORKITEM):
//   - descriptor.h: a kernel's descriptor, the region calls' summary;
//   - stage.h: the uniform values staged before a region;
//   - runs.h: a region run for runs of threads, in any order;
//   - check_hooks.h: the checker's hooks (MK_CHECK);
//   - simd.h: simdgroup functions and named participants between regions;
//   and here, the group driver: it runs the loop function region by region,
//   resolves simdgroup operations between regions and releases barriers,
//   with the scheduler's rules (mk/simd.h, src/mkrt_group.h).
#pragma once

#include "workitem/group.h"

#ifdef MK_WORKITEM
#include "workitem/simd.h"

// The work-item entry of a kernel (`__mk_wientry_<n>`, generated) calls this
// with its descriptor and the kernel's fiber entry point, which takes over
// when the launch does not fit the work-item layout.
extern "C" __attribute__((visibility("hidden"), used)) void __mk_wi_run_group(
    mk::Run* r, const mk::wi::Kernel* k, mk::EntryFn fiber) {
  using namespace mk;
  using namespace mk::wi;
  const Launch* l = r->launch;
  if (l->nbuffers > MK_WI_MAX_BUFFERS || l->ntg_buffers > 64 || k->ntg_allocs > MK_WI_MAX_TG_ALLOCS ||
      r->begin != 0) {
    fiber(r);
    return;
  }
  const u3 gs = r->group_size;
  const uint32_t n = gs.x * gs.y * gs.z;
  const uint64_t o_slots = up64(sizeof(WiGroup));
  const uint64_t o_stage = o_slots + up64(k->slots_size);
  const uint64_t o_frames = o_stage + up64(k->stage_size);
  const uint64_t o_states = o_frames + up64(k->frame_size * n);
  const uint64_t o_released = o_states + up64(4 * uint64_t(n));
  const uint64_t total = o_released + up64(n);
  char* mem = scratch(r, total);
  if (!mem) {
    __mk_rt->fail("out of memory for the work-item context of a threadgroup");
    return;
  }
  WiGroup* g = reinterpret_cast<WiGroup*>(mem);
  const u3 d = l->threads_per_threadgroup;
  const u3 tg = r->threadgroup_position;
  g->group_size = gs;
  g->threadgroup_position = tg;
  g->base = {tg.x * d.x, tg.y * d.y, tg.z * d.z};
  g->threads_per_threadgroup = d;
  g->threadgroups_per_grid = l->threadgroups_per_grid;
  g->threads_per_grid = l->threads_per_grid;
  for (uint32_t i = 0; i < l->nbuffers; ++i) g->buffers[i] = l->buffers[i];
  for (uint32_t i = 0; i < l->ntg_buffers; ++i) g->tg_buffers[i] = r->tg_buffers[i];
  for (uint64_t i = 0; i < k->ntg_allocs; ++i) {
    const TgAlloc& a = k->tg_allocs[i];
    g->tg_allocs[i] = __mk_fiber_tg_alloc(uint32_t(a.slot), a.size, a.align);
  }
#ifndef MK_CHECK
  if (k->uniform && n % MK_SIMD_WIDTH == 0) {
    // Every simdgroup is full and its lanes run alike: once per simdgroup,
    // in another order when the launch asks for one (any order is legal).
    const uint32_t groups = n / MK_SIMD_WIDTH;
    const bool reverse = l->order != MK_ORDER_DEFAULT;
    for (uint32_t i = 0; i < groups; ++i) {
      const uint32_t sg = reverse ? groups - 1 - i : i;
      r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(sg * MK_SIMD_WIDTH));
      k->uniform(g, 0, 0, 0, sg * MK_SIMD_WIDTH);
    }
    return;
  }
#endif
  GroupState G;
  G.k = k;
  G.r = r;
  G.g = g;
  G.slots = mem + o_slots;
  G.stage = mem + o_stage;
  G.frames = mem + o_frames;
  G.st = reinterpret_cast<uint32_t*>(mem + o_states);
  G.released = reinterpret_cast<uint8_t*>(mem + o_released);
  G.n = n;
  G.last_resume = ~0u;
  G.left_at = ~0u;
#ifdef MK_CHECK
  if (const chk::Group* C = chk::begin_group(r, g, k); !C) {
    __mk_rt->fail("internal error: more workers than checker states");
    return;
  } else if (C->skip) {
    return;  // another phase's group (chk::Dispatch::phase)
  }
#endif

  Summary mm = run_range(G, 0, 0, n);
  for (;;) {
    const uint32_t mn = uint32_t(mm.states), live_max = uint32_t(mm.states >> 32);
    if (mn == DONE) return;  // every thread finished
    if (mn == live_max && !named_point(k, mn)) {
      // Every live thread is at the same point (the common case); threads
      // that returned count as arrived at a barrier, and are inactive lanes
      // of a simd function. (mn == live_max: every state is mn or DONE.)
      if (!mm.ndone) {
        if (k->syncs[mn].kind == SYNC_SIMD) simd_range(G, mn, 0, n);
#ifdef MK_CHECK
        else if (k->syncs[mn].kind == SYNC_BARRIER) chk_barrier(G, mn, 0);
#endif
        mm = run_range(G, mn, 0, n);
        continue;
      }
      const uint32_t live = n - mm.ndone;
#ifdef MK_CHECK
      if (k->syncs[mn].kind == SYNC_BARRIER) chk_barrier(G, mn, mm.ndone);
#endif
      if (uint32_t(mm.live_hi) - mm.live_lo == live) {
        // ... and they are consecutive (`if (lid < k) return;` and the
        // like): one run, no per-thread masks.
        const uint32_t lo = mm.live_lo, hi = mm.live_hi;
        if (k->syncs[mn].kind == SYNC_SIMD) simd_range(G, mn, lo, hi);
        mm = combine({DONE, n - live, 0xffff, 0}, run_range(G, mn, lo, hi));
        continue;
      }
      uint32_t masks[MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH];
      state_masks(G, mn, masks);
      if (k->syncs[mn].kind == SYNC_SIMD) simd_at(G, mn, masks);
      mm = run_state(G, mn, live, masks);
      continue;
    }
    // Threads at different points. Those at resume points in loops first:
    // they wait for nothing (and must reach the barriers the others wait at).
    bool at_points = false;
    for (uint32_t t = 0; t < n; ++t) {
      const uint32_t p = G.st[t];
      G.released[t] = p != DONE && k->syncs[p].kind == SYNC_POINT;
      at_points |= G.released[t] != 0;
    }
    // Then simdgroup operations: in each simdgroup, the lanes at the lowest
    // waiting point are the active ones.
    bool any = at_points;
    for (uint32_t lo = 0; lo < n && !at_points; lo += MK_SIMD_WIDTH) {
      const uint32_t hi = lo + MK_SIMD_WIDTH < n ? lo + MK_SIMD_WIDTH : n;
      if (named_resolve(G, lo, hi)) {
        any = true;
        continue;
      }
      uint32_t best = DONE;
      for (uint32_t t = lo; t < hi; ++t) {
        const uint32_t p = G.st[t];
        if (p != DONE && k->syncs[p].kind == SYNC_SIMD && !named_point(k, p) && p < best) best = p;
      }
      if (best == DONE) continue;
      uint32_t mask = 0;
      for (uint32_t t = lo; t < hi; ++t) {
        if (G.st[t] == best) {
          mask |= 1u << (t - lo);
          G.released[t] = 1;
        }
      }
      simd_compute(G, best, lo, hi, mask);
      any = true;
    }
    if (!any) {
      for (uint32_t lo = 0; lo < n; lo += MK_SIMD_WIDTH) {
        const uint32_t hi = lo + MK_SIMD_WIDTH < n ? lo + MK_SIMD_WIDTH : n;
        if (named_lanes(G, lo, hi).waiting) named_deadlock(G, lo, hi);
      }
#ifdef MK_CHECK
      chk_barriers(G);
#endif
      // Every live thread waits at a barrier (not necessarily the same
      // one): release them all.
      for (uint32_t t = 0; t < n; ++t) G.released[t] = G.st[t] != DONE;
    }
    // Run the released threads: runs of consecutive threads at the same point
    // (last run first, or shuffled, under another Launch::order).
    if (__builtin_expect(l->order != MK_ORDER_DEFAULT, 0)) {
      run_released_permuted(G);
      mm = summarize(G.st, n);
      continue;
    }
    for (uint32_t t = 0; t < n;) {
      if (!G.released[t]) {
        ++t;
        continue;
      }
      const uint32_t p = G.st[t];
      uint32_t e = t + 1;
      while (e < n && G.released[e] && G.st[e] == p) ++e;
      run_range(G, p, t, e);
      t = e;
    }
    mm = summarize(G.st, n);
  }
}
#endif  // MK_WORKITEM
