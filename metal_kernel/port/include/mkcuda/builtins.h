// The CUDA execution model on the runtime's: thread and block indices,
// __syncthreads and friends, memory fences, shared memory, printf, assert.
//
// Indices: threadIdx comes from the runtime's thread-index marker
// (__mk_thread_index, which the work-item compiler turns into the loop
// counter), blockIdx / blockDim / gridDim and the dynamic shared memory from
// the group record the runtime fills when a block starts (MK_TG_GROUP_INFO,
// reached through the threadgroup-allocation marker, which the work-item
// compiler turns into a load from the group). No thread-local storage: a
// first access to it in a dlopen'ed library runs __tls_get_addr's slow path,
// which clobbers the AVX-512 registers clang keeps values in across it.
#pragma once
#include <stdint.h>
#include <type_traits>

#include "mk/runtime.h"

namespace mk {
namespace cuda {

// The running block, as the runtime describes it (mk/abi.h GroupInfo).
__attribute__((always_inline)) inline const GroupInfo& group() {
  return *static_cast<const GroupInfo*>(__mk_tg_alloc(MK_TG_GROUP_INFO, sizeof(GroupInfo), alignof(GroupInfo)));
}

__attribute__((always_inline)) inline uint3 block_idx() {
  const u3 v = group().threadgroup_position;
  return uint3{v.x, v.y, v.z};
}
__attribute__((always_inline)) inline dim3 block_dim() {
  const u3 v = group().threads_per_threadgroup;
  return dim3(v.x, v.y, v.z);
}
__attribute__((always_inline)) inline dim3 grid_dim() {
  const u3 v = group().threadgroups_per_grid;
  return dim3(v.x, v.y, v.z);
}

__attribute__((always_inline)) inline unsigned int linear_thread() { return __mk_thread_index(); }

__attribute__((always_inline)) inline uint3 thread_idx() {
  const unsigned int lin = __mk_thread_index();
  const u3 d = group().threads_per_threadgroup;
  if (d.y == 1 && d.z == 1) return uint3{lin, 0u, 0u};
  return uint3{lin % d.x, (lin / d.x) % d.y, lin / (d.x * d.y)};
}

__attribute__((always_inline)) inline unsigned int block_threads() {
  const u3 d = group().threads_per_threadgroup;
  return d.x * d.y * d.z;
}

// Shared memory: one block per (key, block). Keys of __shared__
// declarations hash the enclosing function's signature (template arguments
// included: every instantiation has its own variable, as in CUDA) and the
// declaration's number; they are >= MK_TG_KEYED_SLOTS (mk/abi.h).
constexpr unsigned int shared_key(const char* s, unsigned int index) {
  unsigned int h = 2166136261u;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 16777619u;
  h ^= index * 0x9e3779b9u;
  return h | 0x80000000u;
}
template <class T, unsigned int Key>
__attribute__((always_inline)) inline T& shared() {
  static_assert(Key >= MK_TG_KEYED_SLOTS, "shared keys are above the Metal slots");
  return *static_cast<T*>(__mk_tg_alloc(Key, sizeof(T), alignof(T) < 16 ? 16 : alignof(T)));
}
__attribute__((always_inline)) inline char* dynamic_shared() { return static_cast<char*>(group().tg_buffer0); }

}  // namespace cuda
}  // namespace mk

namespace mk {
namespace cuda {
// threadIdx & co. as constant objects, not macros (host code may name its
// own variables gridDim or blockDim): `.x` reads the runtime on each use.
template <class V, V (*Get)()>
struct Builtin3 {
  __declspec(property(get = get_x)) unsigned int x;
  __declspec(property(get = get_y)) unsigned int y;
  __declspec(property(get = get_z)) unsigned int z;
  __attribute__((always_inline)) unsigned int get_x() const { return Get().x; }
  __attribute__((always_inline)) unsigned int get_y() const { return Get().y; }
  __attribute__((always_inline)) unsigned int get_z() const { return Get().z; }
  __attribute__((always_inline)) operator uint3() const {
    const V v = Get();
    return uint3{v.x, v.y, v.z};
  }
  __attribute__((always_inline)) operator dim3() const {
    const V v = Get();
    return dim3(v.x, v.y, v.z);
  }
};
}  // namespace cuda
}  // namespace mk
constexpr ::mk::cuda::Builtin3<uint3, ::mk::cuda::thread_idx> threadIdx{};
constexpr ::mk::cuda::Builtin3<uint3, ::mk::cuda::block_idx> blockIdx{};
constexpr ::mk::cuda::Builtin3<dim3, ::mk::cuda::block_dim> blockDim{};
constexpr ::mk::cuda::Builtin3<dim3, ::mk::cuda::grid_dim> gridDim{};
constexpr int warpSize = 32;  // a variable, not a macro: cudaDeviceProp has a warpSize member

// ------------------------------------------------------- synchronisation --
// __mk_sync_barrier's flags: device and threadgroup memory (CUDA's barrier
// orders both for the block).
__attribute__((always_inline)) inline void __syncthreads() { __mk_sync_barrier(3u); }

namespace mk {
namespace cuda {
// __syncthreads_count/_and/_or: a barrier that also counts the threads whose
// predicate holds (three barriers: a call must not reset the counters while
// a slow thread still reads the previous call's result).
struct BlockVote {
  unsigned int yes, all;
};
__attribute__((always_inline)) inline BlockVote block_vote(int predicate) {
  BlockVote& v = shared<BlockVote, 0x7fff0001u>();
  __syncthreads();
  if (__mk_thread_index() == 0) v = BlockVote{0, 0};
  __syncthreads();
  __atomic_fetch_add(&v.yes, predicate ? 1u : 0u, __ATOMIC_RELAXED);
  __atomic_fetch_add(&v.all, 1u, __ATOMIC_RELAXED);
  __syncthreads();
  return v;
}
}  // namespace cuda
}  // namespace mk

inline int __syncthreads_count(int predicate) { return int(::mk::cuda::block_vote(predicate).yes); }
inline int __syncthreads_and(int predicate) {
  const ::mk::cuda::BlockVote v = ::mk::cuda::block_vote(predicate);
  return v.yes == v.all;
}
inline int __syncthreads_or(int predicate) { return ::mk::cuda::block_vote(predicate).yes != 0; }

// Every thread of a block runs on one worker: a compiler barrier orders its
// memory for the block; other blocks run on other cores.
inline void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
#ifdef MK_CHECK
// The device-scope fences, for the checker (mk/atomic.h declares it too).
#ifndef MK_CHK_FENCE_MARKER
#define MK_CHK_FENCE_MARKER
extern "C" __attribute__((weak, noinline)) void __mk_chk_fence_marker(uint32_t) {}
#endif
#define MK_CUDA_FENCE_MARKER() __mk_chk_fence_marker(3u)  // release and acquire (mk/check_sync.h)
#else
#define MK_CUDA_FENCE_MARKER() ((void)0)
#endif
inline void __threadfence() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  MK_CUDA_FENCE_MARKER();
}
inline void __threadfence_system() {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  MK_CUDA_FENCE_MARKER();
}

// ----------------------------------------------------------- loads, misc --
template <class T> __attribute__((always_inline)) inline T __ldg(const T* p) { return *p; }
template <class T> __attribute__((always_inline)) inline T __ldcg(const T* p) { return *p; }
template <class T> __attribute__((always_inline)) inline T __ldca(const T* p) { return *p; }
template <class T> __attribute__((always_inline)) inline T __ldcs(const T* p) { return *p; }
template <class T> __attribute__((always_inline)) inline T __ldlu(const T* p) { return *p; }
template <class T> __attribute__((always_inline)) inline T __ldcv(const T* p) { return *p; }
template <class T> __attribute__((always_inline)) inline void __stcg(T* p, T v) { *p = v; }
template <class T> __attribute__((always_inline)) inline void __stcs(T* p, T v) { *p = v; }
template <class T> __attribute__((always_inline)) inline void __stwb(T* p, T v) { *p = v; }
template <class T> __attribute__((always_inline)) inline void __stwt(T* p, T v) { *p = v; }

inline long long clock64() { return static_cast<long long>(__builtin_readcyclecounter()); }
#ifndef MKCUDA_HOST_PROGRAM  // a program has the C library's clock()
inline long clock() { return static_cast<long>(__builtin_readcyclecounter()); }
#endif
inline void __nanosleep(unsigned int) {}  // a scheduling hint
[[noreturn]] inline void __trap() {
  __mk_rt->fail("__trap() was called");
  __builtin_unreachable();
}
[[noreturn]] inline void __brkpt() {
  __mk_rt->fail("__brkpt() was called");
  __builtin_unreachable();
}

#ifndef MKCUDA_HOST_PROGRAM  // a whole program prints with the C library's printf
// ----------------------------------------------------------------- printf --
// Each call appends a record (block, thread, text) to the buffer the host
// hands the library before a launch (port/library.py); the host sorts them
// by block and thread, keeping each thread's order. A full buffer drops the
// record and counts it, like CUDA's printf FIFO.
struct MkPrintfBuffer {
  char* data;
  uint64_t capacity;
  uint64_t used;
  uint64_t dropped;
};
extern "C" __attribute__((visibility("default"))) MkPrintfBuffer __mk_cuda_printf;
MkPrintfBuffer __mk_cuda_printf = {nullptr, 0, 0, 0};

namespace mk {
namespace cuda {
struct PrintfRecord {
  uint32_t size;  // of the whole record, a multiple of 8
  uint32_t thread;
  uint64_t block;
};
}  // namespace cuda
}  // namespace mk

template <class... A>
inline int printf(const char* format, A... args) {
  using ::mk::cuda::PrintfRecord;
  const int n = __builtin_snprintf(nullptr, 0, format, args...);
  if (n < 0) return n;
  const uint64_t size = (sizeof(PrintfRecord) + uint64_t(n) + 1 + 7) & ~uint64_t(7);
  const uint64_t at = __atomic_fetch_add(&__mk_cuda_printf.used, size, __ATOMIC_RELAXED);
  if (!__mk_cuda_printf.data || at + size > __mk_cuda_printf.capacity) {
    __atomic_fetch_add(&__mk_cuda_printf.dropped, 1, __ATOMIC_RELAXED);
    return n;
  }
  char* p = __mk_cuda_printf.data + at;
  const ::mk::GroupInfo& g = ::mk::cuda::group();
  const ::mk::u3 b = g.threadgroup_position, grid = g.threadgroups_per_grid;
  PrintfRecord rec{uint32_t(size), __mk_thread_index(), b.x + uint64_t(grid.x) * (b.y + uint64_t(grid.y) * b.z)};
  __builtin_memcpy(p, &rec, sizeof rec);
  __builtin_snprintf(p + sizeof rec, size_t(n) + 1, format, args...);
  return n;
}

#endif  // MKCUDA_HOST_PROGRAM

// ----------------------------------------------------------------- assert --
// Pass 1 defines assert(e) to call this (port/include/pass1/assert.h).
extern "C" inline void __mk_cuda_assert_fail(const char* expr, const char* file, unsigned int line,
                                             const char* function) {
  char message[480];
  __builtin_snprintf(message, sizeof message, "%s:%u: %s: Assertion `%s` failed.", file, line, function, expr);
  __mk_rt->fail(message);
}
