// Kernel-side half of the execution model: the per-threadgroup thread loop,
// argument binding, threadgroup memory, barriers. Included by mk/prelude.h
// after the Metal types; the rewriter's generated entry points use it.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <type_traits>  // not <tuple>: it drags <cmath> into the global namespace

#include "abi.h"

// Set by the host right after it loads a kernel library.
extern "C" const mk::RuntimeApi* __mk_rt;

// Synchronising calls reach the runtime through these functions (defined in
// mk/workitem.h), never inlined: in a per-thread function (see mk/workitem.h)
// each call is a marker the work-item-loop compiler (runtime/workitem.py)
// cuts the kernel at; everywhere else they call the fiber scheduler.
// `convergent` and `nomerge` keep the optimiser from merging or duplicating
// call sites (each one is a distinct simdgroup operation).
namespace mk {
struct DenseLanes;
}
extern "C" {
__attribute__((noinline, convergent, nomerge)) void __mk_sync_barrier(uint32_t flags);
__attribute__((noinline, convergent, nomerge)) void __mk_sync_simd(
    const void* in, void* out, uint32_t arg, uint32_t op, uint32_t in_size, uint32_t out_size,
    void (*compute)(const mk::SimdLanes&), void (*dense)(const mk::DenseLanes&));
__attribute__((noinline)) uint32_t __mk_thread_index();
__attribute__((noinline)) void* __mk_tg_alloc(uint32_t slot, uint64_t size, uint64_t align);
}

namespace mk {

template <size_t I, class... A>
struct nth_type;
template <class H, class... T>
struct nth_type<0, H, T...> {
  using type = H;
};
template <size_t I, class H, class... T>
struct nth_type<I, H, T...> {
  using type = typename nth_type<I - 1, T...>::type;
};
template <class F>
struct fn_traits;
template <class R, class... A>
struct fn_traits<R (*)(A...)> {
  template <size_t I>
  using arg = typename nth_type<I, A...>::type;
};
// Type of parameter I of the kernel whose address has type F.
template <class F, size_t I>
using arg_t = typename fn_traits<F>::template arg<I>;

// Bytes a parameter reads through its buffer: a `constant T&` needs a whole
// T, a pointer at least one element (void* counts as one byte).
template <class P>
constexpr uint64_t needed_bytes() {
  if constexpr (std::is_reference_v<P>) {
    return sizeof(std::remove_reference_t<P>);
  } else if constexpr (std::is_pointer_v<P>) {
    using E = std::remove_cv_t<std::remove_pointer_t<P>>;
    if constexpr (std::is_void_v<E>) return 1;
    else return sizeof(E);
  } else {
    return sizeof(P);
  }
}

// A parameter of type P (pointer, reference or value) bound to the bytes at p.
template <class P>
__attribute__((always_inline)) inline P bind_address(void* p) {
  if constexpr (std::is_reference_v<P>) {
    return *reinterpret_cast<std::remove_reference_t<P>*>(p);
  } else if constexpr (std::is_pointer_v<P>) {
    return reinterpret_cast<P>(p);
  } else {
    return *reinterpret_cast<const P*>(p);
  }
}

// Binds buffer `i` to a parameter of type P.
template <class P>
__attribute__((always_inline)) inline P buffer_arg(const Launch* l, uint32_t i) {
  return bind_address<P>(l->buffers[i]);
}

template <class P>
__attribute__((always_inline)) inline P threadgroup_arg(const Run* r, uint32_t i) {
  return reinterpret_cast<P>(r->tg_buffers[i]);
}

// Thread attributes may be declared uint, ushort, int, or 2/3-vectors of them.
template <class P>
__attribute__((always_inline)) inline P attr(u3 v) {
  using Q = std::remove_cv_t<std::remove_reference_t<P>>;
  if constexpr (std::is_arithmetic_v<Q>) {
    return static_cast<Q>(v.x);
  } else {
    using E = std::remove_cv_t<std::remove_reference_t<decltype(Q()[0])>>;
    if constexpr (std::is_constructible_v<Q, E, E, E>) {
      return Q(static_cast<E>(v.x), static_cast<E>(v.y), static_cast<E>(v.z));
    } else {
      return Q(static_cast<E>(v.x), static_cast<E>(v.y));
    }
  }
}
template <class P>
__attribute__((always_inline)) inline P attr(uint32_t v) {
  using Q = std::remove_cv_t<std::remove_reference_t<P>>;
  return static_cast<Q>(v);
}

inline uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// Runs the threads [begin, end) of one threadgroup in linear order.
// In the common case (no barrier, no simd function) this is the whole group,
// the kernel is inlined into the innermost loop and the loop vectorises.
// When a thread calls a synchronising function the runtime moves the group
// onto fibers and sets `upgraded`; this loop then stops after that thread.
//
// Track = false is the loop for kernels the compiler proved never
// synchronise ("direct" mode): no bookkeeping per thread, so clang
// vectorises it. A fault there is replayed with Track = true to name the
// thread (library.py).
template <bool Track, class Body>
__attribute__((always_inline)) inline void run_threads_impl(Run* r, Body body) {
#ifdef MK_SGU
  // The whole-simdgroup build links only per-thread functions
  // (runtime/simdgroup_uniform.py): no thread loops to compile.
  (void)r;
  (void)body;
#else
  const Launch* l = r->launch;
  const u3 dtg = l->threads_per_threadgroup;
  const u3 gs = r->group_size;
  const u3 tg = r->threadgroup_position;
  const u3 base = {tg.x * dtg.x, tg.y * dtg.y, tg.z * dtg.z};
  ThreadIds t;
  t.threadgroup_position_in_grid = tg;
  t.threads_per_threadgroup = gs;
  if constexpr (!Track) {
    // Direct loops may cover several consecutive full groups of a row.
    for (uint32_t gi = 0; gi < r->group_count; ++gi) {
      const uint32_t gx = tg.x + gi;
      t.threadgroup_position_in_grid = {gx, tg.y, tg.z};
      for (uint32_t z = 0; z < gs.z; ++z) {
        for (uint32_t y = 0; y < gs.y; ++y) {
          const uint32_t row = gs.x * (y + gs.y * z);
          for (uint32_t x = 0; x < gs.x; ++x) {
            t.thread_position_in_threadgroup = {x, y, z};
            t.thread_position_in_grid = {gx * dtg.x + x, base.y + y, base.z + z};
            t.thread_index_in_threadgroup = row + x;
            body(r, t);
          }
        }
      }
    }
    return;
  }
  // One call of `body` only: a simd function's call site must be the same
  // code address for every thread (see mk/simd.h), whichever way it started.
  uint32_t lin = r->begin;
  while (lin < r->end) {
    const uint32_t x0 = lin % gs.x;
    const uint32_t y = (lin / gs.x) % gs.y;
    const uint32_t z = lin / (gs.x * gs.y);
    const uint32_t row = lin - x0;
    const uint32_t x1 = (r->end - row) < gs.x ? (r->end - row) : gs.x;
    for (uint32_t x = x0; x < x1; ++x) {
      t.thread_position_in_threadgroup = {x, y, z};
      t.thread_position_in_grid = {base.x + x, base.y + y, base.z + z};
      t.thread_index_in_threadgroup = row + x;
      if constexpr (Track) r->current = reinterpret_cast<const void*>(static_cast<uintptr_t>(row + x));
      body(r, t);
      if constexpr (Track) {
        if (__builtin_expect(r->upgraded != nullptr, 0)) return;
      }
    }
    lin = row + x1;
  }
#endif
}

template <class Body>
__attribute__((always_inline)) inline void run_threads(Run* r, Body body) {
  run_threads_impl<true>(r, body);
}

template <class Body>
__attribute__((always_inline)) inline void run_threads_fast(Run* r, Body body) {
  run_threads_impl<false>(r, body);
}

// Threadgroup memory declared in a kernel body (`threadgroup float s[256];`
// becomes `auto& s = ::mk::tg_ref<float[256]>(slot);`). All threads of a
// group get the same block.
template <class T>
__attribute__((always_inline)) inline T& tg_ref(uint32_t slot) {
  return *static_cast<T*>(__mk_tg_alloc(slot, sizeof(T), alignof(T)));
}

}  // namespace mk

namespace metal {

enum class mem_flags : uint32_t {
  mem_none = 0,
  mem_device = 1,
  mem_threadgroup = 2,
  mem_texture = 4,
  mem_threadgroup_imageblock = 8,
  mem_object_data = 16,
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) {
  return mem_flags(uint32_t(a) | uint32_t(b));
}
constexpr mem_flags operator&(mem_flags a, mem_flags b) {
  return mem_flags(uint32_t(a) & uint32_t(b));
}

inline void threadgroup_barrier(mem_flags flags) {
  __mk_sync_barrier(uint32_t(flags));
}

}  // namespace metal
