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
// This file holds:
//   - the fiber-mode definitions of the markers (what every other caller —
//     the direct-mode entry points, functions the transform could not cut —
//     gets): they call the fiber scheduler in the runtime library;
//   - WiGroup, what a per-thread function reads about its group;
//   - the group driver (only in builds for the transform, MK_WORKITEM):
//     it runs the loop function region by region, resolves simdgroup
//     operations between regions and releases barriers, with the scheduler's
//     rules (mk/simd.h, src/mkrt_group.h).
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "abi.h"
#include "named_sync.h"
#include "runtime.h"
#ifdef MK_CHECK
#include "check.h"
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

#ifdef MK_WORKITEM
namespace mk {
namespace wi {

// SYNC_POINT: a resume point in a loop (runtime/workitem/loop_points.py):
// it synchronises nothing, its threads go on before any barrier releases.
enum : uint32_t { SYNC_START = 0, SYNC_BARRIER = 1, SYNC_SIMD = 2, SYNC_POINT = 3 };
constexpr uint32_t DONE = 0x7fffffff;  // a finished thread's state

// One per synchronisation point (index = the point's id; 0 = kernel start).
struct Sync {
  uint32_t kind, op, in_size, out_size;  // simd: operand and result bytes
  void (*compute)(const SimdLanes&);     // simd: the computation (fiber form, unused here)
  void (*dense)(const DenseLanes&);      // simd: the computation over operand arrays
  uint32_t first_uniform, num_uniform;   // this point's entries in Kernel::uniforms
  // The region from this point (runtime/workitem/prefix_guard.py): only
  // threads whose index (GUARD_LIN) or x (GUARD_X) is below guard_below do
  // anything; the others return guard_state and have no other effect.
  uint32_t guard, guard_below, guard_state, pad;
};
enum : uint32_t { GUARD_NONE = 0, GUARD_LIN = 1, GUARD_X = 2 };
// A value live across the point that is probably the same in every thread:
// the region code reads it from the stage block (loop-invariant, so the
// loop vectorises) after the driver checked that all threads agree.
struct Uniform {
  uint64_t slot_offset;   // its per-thread array in the slots block
  uint64_t stage_offset;  // its single copy in the stage block
  uint64_t size;
  // AFFINE_X / AFFINE_LIN: a loop counter at its resume point (4 bytes), or
  // a value defined as x / lin / y (AFFINE_Y) plus a uniform one (4 or 8
  // bytes, any point): what the threads agree on, and the stage holds, is
  // the value minus the thread's x / lin / y; the region code adds it back.
  // | UNIFORM_INVARIANT: a value from before the loop of a resume point;
  // when the threads that last ran from this point come back to it, the
  // stage still holds it (they restored it from there and left it as it was).
  // | UNIFORM_RUN_INVARIANT: every thread of one call of a region that
  // reaches the point saves the same bits (runtime/workitem/run_invariance.py):
  // for threads that all left one call at the point, thread b's bits are
  // everyone's, uncompared.
  uint64_t affine;
};
enum : uint64_t {
  AFFINE_NONE = 0, AFFINE_X = 1, AFFINE_LIN = 2, AFFINE_Y = 3, AFFINE_KIND = 3,
  UNIFORM_INVARIANT = 4, UNIFORM_RUN_INVARIANT = 8
};
struct TgAlloc {
  uint64_t slot, size, align;
};
// What a run of threads ended at: the lowest state, the highest state
// other than DONE (0: none), how many threads are DONE, and the span of the
// threads that are not (when they are consecutive, the driver needs no
// per-thread masks). Returned in two registers; the generated loop function
// returns { i64 states, i64 ndone | live_lo << 32 | live_hi << 48 }.
struct Summary {
  uint64_t states;   // lowest | highest live << 32
  uint32_t ndone;
  uint16_t live_lo;  // lowest thread not DONE (0xffff: none)
  uint16_t live_hi;  // highest thread not DONE, plus one (0: none)
};
static_assert(sizeof(Summary) == 16 && offsetof(Summary, live_lo) == 12, "mirrored in runtime/workitem.py");
// Runs threads [b, e) from `resume` to their next point and stores each
// one's new state: in order, or (nspans > 0) as the spans `spans[i]`
// (lo | hi << 16, together exactly [b, e)) one after the other.
typedef Summary (*LoopFn)(const WiGroup* g, void* slots, void* stage, void* frames, uint32_t* states,
                          uint32_t b, uint32_t e, uint32_t resume, const uint32_t* spans, uint32_t nspans);
// Generated by runtime/workitem.py (layout mirrored there).
struct Kernel {
  LoopFn loop;
  const Sync* syncs;
  uint64_t nsyncs;
  const Uniform* uniforms;
  const TgAlloc* tg_allocs;
  uint64_t ntg_allocs;
  uint64_t slots_size;  // per-thread context arrays (1024 entries each) and simd operands
  uint64_t stage_size;
  uint64_t frame_size;  // per-thread copies of the kernel's local arrays live across points
  uint64_t simd_in_offset, simd_out_offset, simd_arg_offset;
  uint64_t simd_in_stride, simd_out_stride;  // bytes per thread (every point of the kernel)
  // The kernel's per-thread code run once for a whole simdgroup (thread
  // index = the simdgroup's first lane; matrices held whole), or null; see
  // runtime/simdgroup_uniform.py.
  void (*uniform)(const WiGroup* g, uint32_t x, uint32_t y, uint32_t z, uint32_t lin);
};

// Scratch memory of the worker running `r` (kept in the runtime's worker
// slots, shared by every kernel library).
inline char* scratch(Run* r, uint64_t need) {
  char*& t_scratch = reinterpret_cast<char*&>(r->worker[MK_SLOT_SCRATCH]);
  uint64_t& t_scratch_size = reinterpret_cast<uint64_t&>(r->worker[MK_SLOT_SCRATCH_SIZE]);
  if (need > t_scratch_size) {
    if (t_scratch) __builtin_free(reinterpret_cast<void**>(t_scratch)[-1]);
    t_scratch = nullptr;
    t_scratch_size = 0;
    char* raw = static_cast<char*>(__builtin_malloc(need + 128));
    if (!raw) return nullptr;
    char* p = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(raw) + 64 + 63) & ~uintptr_t(63));
    reinterpret_cast<void**>(p)[-1] = raw;
    t_scratch = p;
    t_scratch_size = need;
  }
  return t_scratch;
}

inline uint64_t up64(uint64_t v) { return (v + 63) & ~uint64_t(63); }

// Whether threads [b, e) (of a group `gx` x `gy` threads) hold a[t] = d +
// x(t) (AFFINE_X), d + t (AFFINE_LIN) or d + y(t) (AFFINE_Y) for one d;
// sets *d. (Where they do not, the caller runs them one at a time: slower,
// never wrong.)
template <typename T>
inline bool affine_run(const T* a, uint64_t kind, uint32_t gx, uint32_t gy, uint32_t b, uint32_t e, T* d) {
  if (kind == AFFINE_Y) {
    uint32_t x = b % gx, y = (b / gx) % gy;
    const T first = a[b] - T(y);
    T diff = 0;
    for (uint32_t t = b; t < e; ++t) {
      diff |= (a[t] - T(y)) ^ first;
      if (++x == gx) {
        x = 0;
        y = y + 1 == gy ? 0 : y + 1;
      }
    }
    *d = first;
    return diff == 0;
  }
  T x = kind == AFFINE_X ? b % gx : b;
  const T first = a[b] - x;
  T diff = 0;
  if (kind == AFFINE_LIN || x + (e - b) <= gx) {
    // one row (or lin): consecutive ids, a loop that vectorises
    for (uint32_t t = b; t < e; ++t) diff |= (a[t] - (t - b + x)) ^ first;
  } else {
    for (uint32_t t = b; t < e; ++t) {
      diff |= (a[t] - x) ^ first;
      x = x + 1 == gx ? 0 : x + 1;
    }
  }
  *d = first;
  return diff == 0;
}

// Checks that threads [b, e) agree on the point's uniform values and copies
// them to the stage block.
// `again`: threads [b, e) are (some of) those that ran last, from this
// point, with its values staged: the invariant ones are in place.
__attribute__((always_inline)) inline bool stage_uniforms(const Kernel* k, const Sync& s, const char* slots,
                                                          char* stage, uint32_t b, uint32_t e, uint32_t gx,
                                                          uint32_t gy,
                                                          bool again = false, bool one_call = false) {
  for (uint32_t i = 0; i < s.num_uniform; ++i) {
    const Uniform& u = k->uniforms[s.first_uniform + i];
    if (again && (u.affine & UNIFORM_INVARIANT)) continue;
    const char* arr = slots + u.slot_offset;
    const uint64_t sz = u.size;
    if (one_call && (u.affine & UNIFORM_RUN_INVARIANT)) {
      memcpy(stage + u.stage_offset, arr + b * sz, sz);
      continue;
    }
    if ((u.affine & AFFINE_KIND) != AFFINE_NONE) {
      if (sz == 8) {  // a zext / sext of x or lin plus a uniform (uniformity.affine_values)
        uint64_t d;
        if (!affine_run(reinterpret_cast<const uint64_t*>(arr), u.affine & AFFINE_KIND, gx, gy, b, e, &d)) return false;
        memcpy(stage + u.stage_offset, &d, 8);
      } else {
        uint32_t d;
        if (!affine_run(reinterpret_cast<const uint32_t*>(arr), u.affine & AFFINE_KIND, gx, gy, b, e, &d)) return false;
        memcpy(stage + u.stage_offset, &d, 4);
      }
      continue;
    }
    bool same = true;
    // From b itself (a[b] ^ a[b] is 0): a group of 256 threads is then 8
    // whole vector iterations, where from b + 1 the 31 left over ran
    // through the vectoriser's narrow and scalar remainder loops, which
    // cost more than the rest (the tiled matmul: ~1/8 of its time).
    if (sz == 4) {
      const uint32_t* a = reinterpret_cast<const uint32_t*>(arr);
      const uint32_t first = a[b];
      uint32_t diff = 0;
      for (uint32_t t = b; t < e; ++t) diff |= a[t] ^ first;
      same = diff == 0;
    } else if (sz == 8) {
      const uint64_t* a = reinterpret_cast<const uint64_t*>(arr);
      const uint64_t first = a[b];
      uint64_t diff = 0;
      for (uint32_t t = b; t < e; ++t) diff |= a[t] ^ first;
      same = diff == 0;
    } else {
      for (uint32_t t = b + 1; t < e && same; ++t) same = memcmp(arr + t * sz, arr + b * sz, sz) == 0;
    }
    if (!same) return false;
    memcpy(stage + u.stage_offset, arr + b * sz, sz);
  }
  return true;
}

struct GroupState {
  const Kernel* k;
  Run* r;
  const WiGroup* g;
  char* slots;
  char* stage;
  char* frames;
  uint32_t* st;
  uint8_t* released;
  uint32_t n;
  // The last run_span that staged its point's values for the whole span
  // (resume point, threads), or last_resume ~0: see stage_uniforms' `again`.
  uint32_t last_resume, last_b, last_e;
  // The point every live thread of the last region call [left_b, left_e)
  // left it at, if nothing ran since (else left_at ~0): a run there within
  // those threads skips the check of run-invariant values (stage_uniforms'
  // `one_call`).
  uint32_t left_at, left_b, left_e;
};

inline Summary combine(Summary a, Summary b) {
  const uint32_t mn = uint32_t(a.states) < uint32_t(b.states) ? uint32_t(a.states) : uint32_t(b.states);
  const uint32_t la = uint32_t(a.states >> 32), lb = uint32_t(b.states >> 32);
  return {(uint64_t(la > lb ? la : lb) << 32) | mn, a.ndone + b.ndone,
          a.live_lo < b.live_lo ? a.live_lo : b.live_lo, a.live_hi > b.live_hi ? a.live_hi : b.live_hi};
}

constexpr Summary kEmpty = {0xffffffffu, 0, 0xffff, 0};

inline Summary summarize(const uint32_t* st, uint32_t n) {
  uint32_t mn = 0xffffffffu, mx = 0, done = 0, lo = 0xffff, hi = 0;
  for (uint32_t t = 0; t < n; ++t) {
    const uint32_t p = st[t];
    mn = p < mn ? p : mn;
    const uint32_t live = p == DONE ? 0 : p;
    mx = live > mx ? live : mx;
    done += p == DONE;
    const uint32_t l = p == DONE ? 0xffff : t, h = p == DONE ? 0 : t + 1;
    lo = l < lo ? l : lo;
    hi = h > hi ? h : hi;
  }
  return {(uint64_t(mx) << 32) | mn, done, uint16_t(lo), uint16_t(hi)};
}

// Runs threads [b, e), all resuming at `resume`, in order.
inline Summary run_span(GroupState& G, uint32_t resume, uint32_t b, uint32_t e) {
  const Sync& s = G.k->syncs[resume];
  G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(b));
  const bool again = s.kind == SYNC_POINT && resume == G.last_resume && b >= G.last_b && e <= G.last_e;
  G.last_resume = ~0u;
#ifdef MK_CHECK
  const bool one_call = false;  // checked builds compare every thread's bits
#else
  const bool one_call = resume == G.left_at && b >= G.left_b && e <= G.left_e;
#endif
  G.left_at = ~0u;
  if (s.num_uniform == 0 ||
      stage_uniforms(G.k, s, G.slots, G.stage, b, e, G.g->group_size.x, G.g->group_size.y, again, one_call)) {
    G.last_resume = resume;
    G.last_b = b;
    G.last_e = e;
    const Summary m = G.k->loop(G.g, G.slots, G.stage, G.frames, G.st, b, e, resume, nullptr, 0);
    if (uint32_t(m.states) == uint32_t(m.states >> 32)) {  // every live thread at one point
      G.left_at = uint32_t(m.states);
      G.left_b = b;
      G.left_e = e;
    }
    return m;
  }
  // The threads disagree on a value the region code reads once per run:
  // one thread at a time.
  Summary mm = kEmpty;
  for (uint32_t t = b; t < e; ++t) {
    stage_uniforms(G.k, s, G.slots, G.stage, t, t + 1, G.g->group_size.x, G.g->group_size.y);
    G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(t));
    mm = combine(mm, G.k->loop(G.g, G.slots, G.stage, G.frames, G.st, t, t + 1, resume, nullptr, 0));
  }
  return mm;
}

// A permutation of [0, count): the k-th item is (mul * k + add) mod count
// (mul coprime with count, both below it), walked by adding mul.
struct Affine {
  uint32_t mul, add, count;
  uint32_t next(uint32_t i) const { return i + mul >= count ? i + mul - count : i + mul; }
};

// Greatest common divisor without dividing (Stein's algorithm): order_of
// runs once per region, where a division costs as much as a small region.
inline uint32_t binary_gcd(uint32_t x, uint32_t y) {
  if (!x || !y) return x | y;
  const int shift = __builtin_ctz(x | y);
  x >>= __builtin_ctz(x);
  do {
    y >>= __builtin_ctz(y);
    if (x > y) {
      const uint32_t t = x;
      x = y;
      y = t;
    }
    y -= x;
  } while (y);
  return x << shift;
}

// What makes a group's shuffles differ from another group's.
inline uint32_t group_salt(const GroupState& G) {
  const u3 tg = G.g->threadgroup_position;
  return tg.x * 0x2C1B3C6Du ^ tg.y * 0x297A2D39u ^ tg.z;
}

// Launch::order's permutation of `count` items (count >= 1): last first
// (MK_ORDER_REVERSE), or one drawn from the seed and `salt` (so that each
// group, region and run of threads is shuffled its own way).
inline Affine order_of(const Launch* l, uint32_t count, uint32_t salt) {
  if (l->order == MK_ORDER_REVERSE || count < 2) return {count - 1, count - 1, count};
  uint32_t h = l->seed * 0x9E3779B9u + salt * 0x85EBCA6Bu;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  // h scaled to [0, count) by a multiply (no division)
  const auto below = [count](uint32_t v) { return uint32_t((uint64_t(v) * count) >> 32); };
  uint32_t mul = below(h);
  if ((count & (count - 1)) == 0) {
    mul |= 1;  // the usual power of two: any odd multiplier
  } else {
    mul = mul ? mul : 1;
    while (binary_gcd(mul, count) != 1) mul = mul + 1 < count ? mul + 1 : 1;
  }
  return {mul, below(h * 0x01000193u + 0x7F4A7C15u), count};
}

// At most one span per simdgroup, or per thread in groups of two
// simdgroups or less.
constexpr uint32_t kMaxSpans = MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH > 2 * MK_SIMD_WIDTH
                                   ? MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH
                                   : 2 * MK_SIMD_WIDTH;

// Launch::order other than the default: the threads of a region run in
// another legal order. Metal orders nothing between two synchronisation
// points, so any order of whole per-thread regions is one the GPU may
// produce: simdgroups last first (MK_ORDER_REVERSE) or shuffled
// (MK_ORDER_SHUFFLE); within a simdgroup, threads in order, except in groups of at most two
// simdgroups, where they run last first too.
// Writes threads [b, e) as spans (LoopFn) in that order and returns how
// many; 0 when they are one simdgroup's threads in order (the loop's own).
__attribute__((always_inline)) inline uint32_t permuted_spans(const GroupState& G, uint32_t resume, uint32_t b,
                                                              uint32_t e, uint32_t* spans) {
  const uint32_t first = b / MK_SIMD_WIDTH, count = (e - 1) / MK_SIMD_WIDTH - first + 1;
  const bool each_thread = G.n <= 2 * MK_SIMD_WIDTH;
  if (count == 1 && !each_thread) return 0;
  const Affine order = order_of(G.r->launch, count, group_salt(G) + resume * 0x10001u + b);
  uint32_t n = 0;
  for (uint32_t k = 0, i = order.add; k < count; ++k, i = order.next(i)) {
    const uint32_t sg = first + i;
    const uint32_t lo = sg * MK_SIMD_WIDTH > b ? sg * MK_SIMD_WIDTH : b;
    const uint32_t hi = (sg + 1) * MK_SIMD_WIDTH < e ? (sg + 1) * MK_SIMD_WIDTH : e;
    if (!each_thread) {
      spans[n++] = lo | hi << 16;
      continue;
    }
    for (uint32_t t = hi; t > lo; --t) spans[n++] = (t - 1) | t << 16;
  }
  return n;
}

// The summary of threads [b, e) (b < e) that all ended at `p`.
inline Summary same_state(uint32_t p, uint32_t b, uint32_t e) {
  if (p == DONE) return {DONE, e - b, 0xffff, 0};
  return {uint64_t(p) << 32 | p, 0, uint16_t(b), uint16_t(e)};
}

// The threads of [b, e) that are idle in the region from point `s` (its
// guard, runtime/workitem/prefix_guard.py: they only return guard_state; a
// guard on x bounds the thread index when the group is one row) have no
// order anyone could observe: they get their state here, all at once, and
// `idle` their summary. Returns where they start (e if none).
inline uint32_t settle_idle(GroupState& G, const Sync& s, uint32_t b, uint32_t e, Summary* idle) {
  const u3 gs = G.g->group_size;
  if (s.guard == GUARD_NONE || (s.guard == GUARD_X && gs.y * gs.z != 1) || s.guard_below >= e) return e;
  const uint32_t from = s.guard_below > b ? s.guard_below : b;
  const uint32_t p = s.guard_state;  // a local: the stores below cannot change it
  uint32_t* const st = G.st;
  for (uint32_t t = from; t < e; ++t) st[t] = p;
  *idle = same_state(p, from, e);
  return from;
}

// Threads [b, e) in Launch::order: one call of the region loop over the
// spans, the region's uniform values staged once, as for the default order.
__attribute__((noinline)) inline Summary run_permuted(GroupState& G, uint32_t resume, uint32_t b, uint32_t e) {
  const Sync& s = G.k->syncs[resume];
  Summary mm = kEmpty;
  e = settle_idle(G, s, b, e, &mm);
  uint32_t spans[kMaxSpans];
  const uint32_t nspans = e > b ? permuted_spans(G, resume, b, e, spans) : 0;
  G.last_resume = ~0u;  // the stage is about to change
  G.left_at = ~0u;
  if (nspans <= 1) return e > b ? combine(mm, run_span(G, resume, b, e)) : mm;
  if (s.num_uniform == 0 || stage_uniforms(G.k, s, G.slots, G.stage, b, e, G.g->group_size.x, G.g->group_size.y)) {
    G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(b));
    return combine(mm, G.k->loop(G.g, G.slots, G.stage, G.frames, G.st, b, e, resume, spans, nspans));
  }
  // The threads disagree on a value the region code reads once per call:
  // span by span (run_span goes on to one thread at a time where needed).
  for (uint32_t i = 0; i < nspans; ++i) mm = combine(mm, run_span(G, resume, spans[i] & 0xffff, spans[i] >> 16));
  return mm;
}

// Runs threads [b, e), all resuming at `resume`.
inline Summary run_range(GroupState& G, uint32_t resume, uint32_t b, uint32_t e);

// The released threads of a round, runs of consecutive threads at the same
// point, the runs in reverse or shuffled order (Launch::order).
__attribute__((noinline)) inline void run_released_permuted(GroupState& G) {
  uint16_t starts[MK_MAX_THREADS_PER_GROUP], ends[MK_MAX_THREADS_PER_GROUP];
  uint32_t runs = 0;
  for (uint32_t t = 0; t < G.n;) {
    if (!G.released[t]) {
      ++t;
      continue;
    }
    uint32_t e = t + 1;
    while (e < G.n && G.released[e] && G.st[e] == G.st[t]) ++e;
    starts[runs] = uint16_t(t);
    ends[runs] = uint16_t(e - 1);
    ++runs;
    t = e;
  }
  if (!runs) return;
  const Affine order = order_of(G.r->launch, runs, group_salt(G) ^ (0xFFFFFFFFu - runs));
  for (uint32_t k = 0, i = order.add; k < runs; ++k, i = order.next(i))
    run_range(G, G.st[starts[i]], starts[i], uint32_t(ends[i]) + 1);
}

inline Summary run_range(GroupState& G, uint32_t resume, uint32_t b, uint32_t e) {
  if (__builtin_expect(G.r->launch->order != MK_ORDER_DEFAULT, 0) && e > b + 1) return run_permuted(G, resume, b, e);
  return run_span(G, resume, b, e);
}

static_assert(MK_SIMD_WIDTH == 32, "state_masks packs a simdgroup into 32 bits");
typedef uint32_t StateRow __attribute__((ext_vector_type(32)));
typedef bool StateBits __attribute__((ext_vector_type(32)));
static_assert(sizeof(StateBits) == 4, "32 lanes, one bit each");

// Bit t % 32 of masks[t / 32]: thread t is at point `p`.
inline void state_masks(const GroupState& G, uint32_t p, uint32_t* masks) {
  uint32_t lo = 0;
  for (; lo + MK_SIMD_WIDTH <= G.n; lo += MK_SIMD_WIDTH) {
    // A whole simdgroup: one vector compare, its lanes' bits as an integer.
    StateRow row;
    memcpy(&row, G.st + lo, sizeof(row));
    const StateBits eq = __builtin_convertvector(row == p, StateBits);
    uint32_t mask;
    memcpy(&mask, &eq, sizeof(mask));
    masks[lo / MK_SIMD_WIDTH] = mask;
  }
  if (lo < G.n) {
    uint32_t mask = 0;
    for (uint32_t t = lo; t < G.n; ++t) mask |= uint32_t(G.st[t] == p) << (t - lo);
    masks[lo / MK_SIMD_WIDTH] = mask;
  }
}

// The first thread from `t` on whose bit is `set` (G.n if none).
inline uint32_t next_bit(const GroupState& G, const uint32_t* masks, uint32_t t, bool set) {
  const uint32_t words = (G.n + MK_SIMD_WIDTH - 1) / MK_SIMD_WIDTH;
  for (uint32_t w = t / MK_SIMD_WIDTH; w < words; ++w) {
    uint32_t v = set ? masks[w] : ~masks[w];
    if (w == t / MK_SIMD_WIDTH) v &= ~0u << (t % MK_SIMD_WIDTH);
    if (v) {
      const uint32_t r = w * MK_SIMD_WIDTH + uint32_t(__builtin_ctz(v));
      return r < G.n ? r : G.n;
    }
  }
  return G.n;
}

// Runs the `live` threads whose state is `p` (`masks`, from state_masks),
// in runs of consecutive ones; every other thread has finished.
inline Summary run_state(GroupState& G, uint32_t p, uint32_t live, const uint32_t* masks) {
  Summary mm = {DONE, G.n - live, 0xffff, 0};
  for (uint32_t t = next_bit(G, masks, 0, true); t < G.n;) {
    const uint32_t e = next_bit(G, masks, t, false);
    mm = combine(mm, run_range(G, p, t, e));
    t = e < G.n ? next_bit(G, masks, e, true) : G.n;
  }
  return mm;
}

#ifdef MK_CHECK
// ------------------------------------------------------ checking hooks --
// (checked builds: see mk/check.h). Sync::op carries, from the
// instrumentation, the barrier's mem_flags (bits 0..7; simd points: the op,
// and a simdgroup barrier's flags in bits 8..15) and its site (bits 16..31).
inline chk::Group* chk_of(const GroupState& G) { return static_cast<chk::Group*>(G.g->chk); }

inline uint32_t first_thread_at(const GroupState& G, uint32_t p, uint32_t from = 0) {
  for (uint32_t t = from; t < G.n; ++t)
    if (G.st[t] == p) return t;
  return G.n;
}

inline void chk_apply_barrier(chk::Group* C, uint32_t flags) {
  if (flags & uint32_t(metal::mem_flags::mem_threadgroup)) {
    ++C->tg_epoch;
    chk::drop_loop_reads(C);  // their stamps are of the last epoch
  }
  if (flags & uint32_t(metal::mem_flags::mem_device)) ++C->dev_epoch;
}

// Every live thread waits at barrier `p`; `ndone` threads returned instead.
inline void chk_barrier(GroupState& G, uint32_t p, uint32_t ndone) {
  chk::Group* C = chk_of(G);
  const uint32_t op = G.k->syncs[p].op;
  if (ndone && (C->d->tools & chk::TOOL_SYNC)) {
    chk::Record rec = chk::make_record(C, chk::K_RETURNED, op >> 16, first_thread_at(G, DONE));
    rec.other_lin = first_thread_at(G, p);
    rec.offset = ndone;
    chk::report(C, rec);
  }
  chk_apply_barrier(C, op & 0xff);
}

// Every live thread waits at a barrier, not all at the same one.
inline void chk_barriers(GroupState& G) {
  chk::Group* C = chk_of(G);
  uint32_t first = DONE, flags = 0, ndone = 0;
  for (uint32_t t = 0; t < G.n; ++t) {
    const uint32_t p = G.st[t];
    if (p == DONE) { ++ndone; continue; }
    flags |= G.k->syncs[p].op & 0xff;
    if (first == DONE) first = p;
  }
  if (C->d->tools & chk::TOOL_SYNC) {
    // The optimiser may copy one barrier of the source into two branches:
    // points at the same source line are the same barrier.
    const uint32_t first_site = G.k->syncs[first].op >> 16;
    for (uint32_t t = 0; t < G.n; ++t) {
      const uint32_t p = G.st[t];
      if (p == DONE || p == first) continue;
      const uint32_t site = G.k->syncs[p].op >> 16;
      if (site == first_site && site != 0xffff) continue;
      chk::Record rec = chk::make_record(C, chk::K_DIVERGENCE, G.k->syncs[first].op >> 16, first_thread_at(G, first));
      rec.other_site = G.k->syncs[p].op >> 16;
      rec.other_lin = t;
      chk::report(C, rec);
      break;
    }
    if (ndone) {
      chk::Record rec = chk::make_record(C, chk::K_RETURNED, G.k->syncs[first].op >> 16, first_thread_at(G, DONE));
      rec.other_lin = first_thread_at(G, first);
      rec.offset = ndone;
      chk::report(C, rec);
    }
  }
  chk_apply_barrier(C, flags);
}

// A simd computation over simdgroups [lo / 32, lo / 32 + groups).
inline void chk_simd(GroupState& G, const Sync& s, uint32_t lo, uint32_t groups) {
  chk::Group* C = chk_of(G);
  C->simd_site = s.op >> 16;
  C->simd_lo = lo;
  if ((s.op & 0xff) == SIMD_BARRIER && (((s.op >> 8) & 0xff) & uint32_t(metal::mem_flags::mem_threadgroup))) {
    if (C->nlog) chk::flush_loop_reads(C);  // logged reads carry the clocks they ran at
    for (uint32_t i = 0; i < groups; ++i) ++C->sgc[lo / MK_SIMD_WIDTH + i];
  }
}
#endif

// The simd computation of point `id` over the lanes `mask` of simdgroup
// [lo, hi), or, with `groups` > 1, over `groups` full simdgroups from `lo`.
inline void simd_compute(GroupState& G, uint32_t id, uint32_t lo, uint32_t hi, uint32_t mask,
                         uint32_t groups = 1) {
  const Sync& s = G.k->syncs[id];
  DenseLanes l;
  l.in = G.slots + G.k->simd_in_offset + uint64_t(lo) * G.k->simd_in_stride;
  l.out = G.slots + G.k->simd_out_offset + uint64_t(lo) * G.k->simd_out_stride;
  l.args = reinterpret_cast<const uint32_t*>(G.slots + G.k->simd_arg_offset) + lo;
  l.in_stride = uint32_t(G.k->simd_in_stride);
  l.out_stride = uint32_t(G.k->simd_out_stride);
  l.active_mask = mask;
  l.count = hi - lo;
  l.groups = groups;
#ifdef MK_CHECK
  chk_simd(G, s, lo, groups);
  l.check = G.g->chk;
#endif
  s.dense(l);
}

// Reductions (mk/simd.h) and simdgroup matrix products
// (mk/simdgroup_matrix.h) take several full simdgroups in one call.
inline bool simd_multi(uint32_t op) {
  return (op >= SIMD_SUM && op <= SIMD_XOR) || op == SIMD_ANY || op == SIMD_ALL || op == SIMD_MATRIX;
}

// Lanes [a, b) of simdgroup [lo, hi) (a, b inside it).
inline uint32_t lane_span(uint32_t lo, uint32_t a, uint32_t b) {
  const uint32_t w = b - a;
  return (w >= MK_SIMD_WIDTH ? 0xffffffffu : (1u << w) - 1u) << (a - lo);
}

// Threads [b, e) wait at simd point `id`, every other thread has finished:
// each simdgroup's lanes in [b, e) are its active lanes.
inline void simd_range(GroupState& G, uint32_t id, uint32_t b, uint32_t e) {
  const Sync& s = G.k->syncs[id];
  uint32_t lo = b & ~uint32_t(MK_SIMD_WIDTH - 1);
  if (lo < b) {  // a simdgroup entered part of the way
    const uint32_t hi = lo + MK_SIMD_WIDTH < G.n ? lo + MK_SIMD_WIDTH : G.n;
    simd_compute(G, id, lo, hi, lane_span(lo, b, e < hi ? e : hi));
    lo += MK_SIMD_WIDTH;
  }
  const uint32_t full = lo < e ? (e - lo) / MK_SIMD_WIDTH : 0;
  if (full > 1 && simd_multi(s.op & 0xff)) {
    simd_compute(G, id, lo, lo + MK_SIMD_WIDTH, 0xffffffffu, full);
    lo += full * MK_SIMD_WIDTH;
  }
  for (; lo < e; lo += MK_SIMD_WIDTH) {
    const uint32_t hi = lo + MK_SIMD_WIDTH < G.n ? lo + MK_SIMD_WIDTH : G.n;
    simd_compute(G, id, lo, hi, lane_span(lo, lo, e < hi ? e : hi));
  }
}

// Lanes of each simdgroup waiting at point `p` (`masks`) run its computation.
inline void simd_at(GroupState& G, uint32_t p, const uint32_t* masks) {
  for (uint32_t lo = 0; lo < G.n; lo += MK_SIMD_WIDTH) {
    const uint32_t hi = lo + MK_SIMD_WIDTH < G.n ? lo + MK_SIMD_WIDTH : G.n;
    const uint32_t mask = masks[lo / MK_SIMD_WIDTH];
    if (mask) simd_compute(G, p, lo, hi, mask);
  }
}

// Simd point `p` is an operation whose participants are named by a mask
// (CUDA warp functions, mk/named_sync.h).
inline bool named_point(const Kernel* k, uint32_t p) {
  return k->syncs[p].kind == SYNC_SIMD && named::is_named(k->syncs[p].op);
}

inline named::Lanes named_lanes(const GroupState& G, uint32_t lo, uint32_t hi) {
  const uint32_t* args = reinterpret_cast<const uint32_t*>(G.slots + G.k->simd_arg_offset);
  named::Lanes nl;
  nl.waiting = nl.gone = 0;
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
    const uint32_t t = lo + i;
    if (t >= hi || G.st[t] == DONE) {
      nl.gone |= 1u << i;
      continue;
    }
    if (named_point(G.k, G.st[t])) {
      nl.waiting |= 1u << i;
      nl.ops[i] = G.k->syncs[G.st[t]].op;
      nl.masks[i] = args[t];
    }
  }
  return nl;
}

// The lanes of simdgroup [lo, hi) at named operations whose masks are
// complete compute together (maybe from different call sites: their
// operand rows have one stride) and are released.
inline bool named_resolve(GroupState& G, uint32_t lo, uint32_t hi) {
  const named::Lanes nl = named_lanes(G, lo, hi);
  uint32_t leader = 0;
  const uint32_t p = nl.waiting ? named::complete_group(nl, &leader) : 0;
  if (!p) return false;
  simd_compute(G, G.st[lo + uint32_t(__builtin_ctz(p))], lo, hi, p);
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i)
    if ((p >> i) & 1u) G.released[lo + i] = 1;
  return true;
}

// Nothing can go on while a lane waits at a named operation: a GPU would hang.
[[noreturn]] inline void named_deadlock(GroupState& G, uint32_t lo, uint32_t hi) {
  const named::Lanes nl = named_lanes(G, lo, hi);
  char msg[400];
  const uint32_t lane = named::stuck_message(nl, lo, msg, sizeof msg, [&](uint32_t j) {
    return G.k->syncs[G.st[lo + j]].kind == SYNC_BARRIER ? "waits at a block-wide barrier (__syncthreads)"
                                                         : "waits at another simdgroup operation";
  });
  G.r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(lo + lane));
  __mk_rt->fail(msg);
  __builtin_unreachable();
}

}  // namespace wi
}  // namespace mk

#ifdef MK_CHECK
namespace mk {
namespace chk {

// A group starts: its checker state, and `g->chk` pointing at it.
inline Group* begin_group(const Run* r, WiGroup* g, const wi::Kernel* k) {
  const Launch* l = r->launch;
  Group* G = group_state(r->worker, static_cast<Dispatch*>(l->check));
  if (!G) return nullptr;
  G->d = static_cast<Dispatch*>(l->check);
  const u3 tg = r->threadgroup_position, ng = l->threadgroups_per_grid;
  G->group = tg.x + ng.x * (tg.y + ng.y * tg.z);
  const Dispatch* d = G->d;
  bool rep = false;
  for (uint32_t i = 0; i < d->nreps; ++i) rep |= d->reps[i] == G->group;
  G->skip = d->phase == PHASE_REPS ? !rep : d->phase != PHASE_ALL && rep;
  G->tg_off = d->phase == PHASE_OTHERS_FAST;
  if (G->skip) return G;
  if (++G->gen == 0) G->gen = 1;  // entries of generation 0 are empty
  G->tg_epoch = 0;
  G->dev_epoch = 0;
  drop_loop_reads(G);
  memset(G->sgc, 0, sizeof G->sgc);
  uint64_t lo = ~uint64_t(0);
  for (uint64_t i = 0; i < k->ntg_allocs; ++i) {
    if (uint32_t(k->tg_allocs[i].slot) == MK_TG_GROUP_INFO) continue;  // the group record, not the arena
    const uint64_t a = reinterpret_cast<uint64_t>(g->tg_allocs[i]);
    lo = a < lo ? a : lo;
  }
  G->ntgp = l->ntg_buffers < 64 ? l->ntg_buffers : 64;
  for (uint32_t i = 0; i < G->ntgp; ++i) {
    const uint64_t a = reinterpret_cast<uint64_t>(g->tg_buffers[i]);
    G->tgp_lo[i] = a;
    G->tgp_size[i] = l->tg_buffer_sizes[i];
    lo = a < lo ? a : lo;
  }
  G->tg_lo = lo == ~uint64_t(0) ? 0 : lo;
  G->scratch_lo = reinterpret_cast<uint64_t>(r->worker[MK_SLOT_SCRATCH]);
  G->scratch_size = reinterpret_cast<uint64_t>(r->worker[MK_SLOT_SCRATCH_SIZE]);
  g->chk = G;
  return G;
}

// See the declaration in mk/check.h.
__attribute__((noinline)) inline void* classify(Group* G, uint32_t lin, void* p, uint64_t size, uint32_t info,
                                                uint32_t site) {
  const uint64_t a = reinterpret_cast<uint64_t>(p);
  Dispatch* d = G->d;
  for (uint32_t b = 0; b < d->nbuffers; ++b) {
    const Buffer& B = d->buffers[b];
    if (!B.size || a < B.lo || a >= B.lo + B.size) continue;
    if (out_of(a, size, B.lo, B.size) || misaligned(a, info)) {
      void* q = bad_access(G, lin, p, size, info, site, O_BUFFER | b, B.lo, B.size, !out_of(a, size, B.lo, B.size));
      if (q != p) return q;
    }
    if (B.shadow && size && !(info & A_ATOMIC)) dev_access(G, B, a - B.lo, size, lin, info, site, b);
    return p;
  }
  if (G->tg_lo && a >= G->tg_lo && a < G->tg_lo + kTgArena) {
    if (size && (d->tools & (TOOL_RACE | TOOL_INIT))) {
      uint8_t uninit = 0;
      tg_access(G, a, size, lin, info, site, G->tg_lo, O_UNKNOWN, &uninit);
      if (uninit) uninit_read(G, lin, p, size, site, G->tg_lo, kTgArena, O_UNKNOWN);
    }
    return p;
  }
  // Private memory: this worker's stack, or the group's work-item context
  // (the per-thread frames of private arrays live there).
  const uint64_t sp = reinterpret_cast<uint64_t>(__builtin_frame_address(0));
  if ((a + (uint64_t(8) << 20) >= sp && a < sp + (uint64_t(8) << 20)) ||
      (a >= G->scratch_lo && a < G->scratch_lo + G->scratch_size))
    return p;
  return bad_access(G, lin, p, size, info, site, O_UNKNOWN, 0, 0, false);
}

}  // namespace chk
}  // namespace mk
#endif

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
