// The binary interface between the runtime library (src/mkrt.cpp) and the
// kernel libraries the compiler builds from MSL. Plain C layout: Python fills
// some of these structs through ctypes (see runtime/native.py), so any change
// here must be mirrored there and bumps RUNTIME_ABI_VERSION.
#pragma once
#include <stddef.h>
#include <stdint.h>

#define MK_ABI_VERSION 5
#define MK_SIMD_WIDTH 32
#define MK_MAX_THREADS_PER_GROUP 1024
#define MK_MAX_TG_MEMORY 32768
// CUDA blocks (metal_kernel.port) may use up to 227 KiB of shared memory, as
// on an H100/H200; the arena is that large, Metal dispatches stop at 32 KiB.
#define MK_MAX_CUDA_SHARED_MEMORY 232448
#define MK_MAX_TG_SLOTS 256
// Threadgroup allocations keyed by a slot at or above this are looked up by
// key (CUDA __shared__ variables: a hash per declaration and instantiation).
#define MK_TG_KEYED_SLOTS 256
// This key returns the running group's GroupInfo (read-only), filled by the
// runtime: how code that has no thread attributes (CUDA's blockIdx in any
// device function) learns where it runs, in every execution mode.
#define MK_TG_GROUP_INFO 0xFFFFFFFFu
#define MK_WI_CHK_OFFSET 1616  // offsetof(WiGroup, chk), mk/workitem/group.h

// mkrt_dispatch flags
#define MK_DISPATCH_NEVER_SYNCS 1u  // the entry never synchronises: no fiber per group
#define MK_DISPATCH_COALESCE 2u     // ... and uses no threadgroup memory: one call may run
                                    // several consecutive full groups of a row
#define MK_DISPATCH_NO_FIBER 4u     // a work-item entry whose launch fits the work-item
                                    // layout: it never falls back to fibers, so it runs on
                                    // the worker's own stack (mk/workitem.h)
#define MK_DISPATCH_CUDA 8u         // a CUDA kernel: shared memory up to
                                    // MK_MAX_CUDA_SHARED_MEMORY, errors speak of CUDA

namespace mk {

struct u3 {
  uint32_t x, y, z;
};

// One dispatch, as the host describes it.
struct Launch {
  void* const* buffers;           // buffer index -> address
  const uint64_t* buffer_sizes;   // bytes available from that address
  uint32_t nbuffers;
  u3 threads_per_grid;            // threads that exist (dispatchThreads)
  u3 threads_per_threadgroup;     // the dispatched threadgroup shape
  u3 threadgroups_per_grid;
  uint32_t ntg_buffers;           // [[threadgroup(n)]] parameters
  const uint32_t* tg_buffer_sizes;
  // The order the dispatch runs in (metal_kernel.check varies it to expose
  // results that depend on the schedule): MK_ORDER_* for the threadgroups
  // and, in work-item loops, the threads between two synchronisation
  // points; `seed` for MK_ORDER_SHUFFLE; `max_workers` (0: all) workers.
  uint32_t order;
  uint32_t seed;
  uint32_t max_workers;
  void* check;                    // checked libraries: the dispatch's mk::chk::Dispatch
  // Groups this launch leaves out (linear indices, x fastest): the checker
  // runs a few groups checked and the rest in the ordinary build
  // (check/session.py).
  const uint32_t* skip;
  uint32_t nskip;
};

#define MK_ORDER_DEFAULT 0u
#define MK_ORDER_REVERSE 1u  // last threadgroup first; threads of a region last first
#define MK_ORDER_SHUFFLE 2u  // a seeded permutation of both

// Everything a kernel can ask about the thread it runs as. Built by the
// kernel-side loop (mk/runtime.h) so that unused fields cost nothing.
struct ThreadIds {
  u3 thread_position_in_grid;
  u3 thread_position_in_threadgroup;
  u3 threadgroup_position_in_grid;
  u3 threads_per_threadgroup;          // actual size of this (maybe partial) group
  uint32_t thread_index_in_threadgroup;
};

struct Group;

// One call of a kernel entry point: run the threads [begin, end) of one
// threadgroup, in linear order. `current` and `upgraded` are pointer-typed on
// purpose: kernels never store pointers, so type-based alias analysis lets the
// compiler keep them out of vectorised loops (see mk/runtime.h).
struct Run {
  Group* group;
  const Launch* launch;
  u3 threadgroup_position;
  u3 group_size;                 // actual threads in this group, per dimension
  uint32_t begin, end;
  const void* current;           // linear index of the running thread, as a pointer
  const void* upgraded;          // non-null once the group runs on fibers
  void* const* tg_buffers;       // [[threadgroup(n)]] storage of this group
  uint32_t group_count;          // direct loops: this many full groups along x from
                                 // threadgroup_position (MK_DISPATCH_COALESCE), else 1
  // Per-worker slots the runtime keeps for kernel libraries, which keep no
  // thread-local state of their own (the first access to a dlopen'ed
  // library's TLS goes through __tls_get_addr, whose slow path has been seen
  // to clobber vector registers). See MK_SLOT_*.
  void** worker;
};

#define MK_WORKER_SLOTS 4
#define MK_SLOT_SCRATCH 0       // the work-item driver's context block (mk/workitem.h)
#define MK_SLOT_SCRATCH_SIZE 1
#define MK_SLOT_CHECK 2         // checked builds: this worker's chk::Group (mk/check.h)
#define MK_SLOT_CHECK_SERIAL 3  // ... and the dispatch it belongs to

typedef void (*EntryFn)(Run*);

// What MK_TG_GROUP_INFO returns.
struct GroupInfo {
  u3 threadgroup_position;
  u3 threads_per_threadgroup;    // the dispatched shape
  u3 threadgroups_per_grid;
  uint32_t pad;
  void* tg_buffer0;              // [[threadgroup(0)]] storage (CUDA: dynamic shared memory)
};

// A simdgroup operation as one lane publishes it.
struct SimdCall {
  const void* in;       // the lane's operand
  void* out;            // where the lane's result goes
  uint32_t arg;         // lane index / delta / mask operand
  uint32_t op;          // SimdOp, for reports
};

// What the elected lane (the lowest active one) sees: every lane's call,
// null for inactive lanes.
struct SimdLanes {
  SimdCall* lane[MK_SIMD_WIDTH];
  uint32_t active_mask;
  uint32_t count;       // lanes in this simdgroup (partial at the end)
};

// Services the kernel side calls. One table, set once per kernel library.
// The runtime knows which thread is running, so calls carry no context.
struct RuntimeApi {
  uint32_t abi_version;
  // Blocks until every live thread of the group reached a barrier.
  void (*threadgroup_barrier)(uint32_t flags, uintptr_t site);
  // Blocks until the simdgroup's active lanes are known. Returns the lane
  // table to the elected lane (which computes every result) and null to the
  // others (whose results are then already written).
  SimdLanes* (*simd_sync)(SimdCall* call, uintptr_t site);
  // Threadgroup memory declared in a kernel body: one block per group and slot.
  void* (*threadgroup_alloc)(uint32_t slot, size_t size, size_t align);
  // Aborts the dispatch with a message (never returns).
  void (*fail)(const char* message);
  // thread_index_in_threadgroup of the running thread.
  uint32_t (*thread_index)();
};

}  // namespace mk
