// The runtime library: runs a dispatch's threadgroups on a pool of worker
// threads, and the threads of one threadgroup cooperatively so that barriers
// and simdgroup functions have Metal's meaning.
//
// A threadgroup starts in "direct" mode: one fiber runs its threads one after
// the other through the kernel's loop (mk/runtime.h). Most kernels never
// synchronise and finish that way, with no context switch per thread. The
// first barrier or simd function switches the group to fiber mode: the
// calling thread keeps the fiber it runs on, the threads after it get fibers
// of their own, the threads before it have already finished (a legal Metal
// schedule, since they never waited for anyone). The scheduler then runs
// ready fibers until all are blocked, resolves simdgroup calls (active lanes
// = lanes blocked at the same call site) and barriers, and repeats.
//
// Faults in kernel code (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) end the
// dispatch with an error naming the thread; the process lives on.
#include <errno.h>
#include <sched.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// No C++ runtime: this library needs libc alone (pthreads, calloc,
// signals), so nothing of libc++ is built or loaded for it.


#include "mk/abi.h"
#include "mk/named_sync.h"

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

using namespace mk;

namespace {

// ---------------------------------------------------------------- fibers --

constexpr size_t kStackSize = 256 * 1024;
constexpr size_t kGuard = 4096;

struct Stack {
  char* base = nullptr;  // lowest address, guard page included
  char* top() const { return base + kStackSize + kGuard; }
};

Stack new_stack() {
  Stack s;
  void* p = mmap(nullptr, kStackSize + kGuard, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return s;
  mprotect(p, kGuard, PROT_NONE);  // overflow faults instead of corrupting
  s.base = static_cast<char*>(p);
  return s;
}

typedef void (*FiberMain)(void*, void*);

#if defined(__x86_64__)
extern "C" void mk_switch(void** save_sp, void* new_sp);
extern "C" void mk_fiber_trampoline();
// Saves the callee-saved registers on the current stack, stores the stack
// pointer, and resumes the other context. Kernels never change the floating
// point environment, so MXCSR and the x87 control word are not switched.
asm(R"(
.text
.p2align 4
.hidden mk_switch
.globl mk_switch
.type mk_switch,@function
mk_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size mk_switch,.-mk_switch
.p2align 4
.hidden mk_fiber_trampoline
.globl mk_fiber_trampoline
.type mk_fiber_trampoline,@function
mk_fiber_trampoline:
  movq %r12, %rdi
  movq %r13, %rsi
  callq *%r14
  ud2
.size mk_fiber_trampoline,.-mk_fiber_trampoline
)");

struct Context {
  void* sp = nullptr;
};

// Lays out a stack so that switching to it enters fn(a, b).
void make_context(Context* c, const Stack& s, FiberMain fn, void* a, void* b) {
  uintptr_t top = reinterpret_cast<uintptr_t>(s.top()) & ~uintptr_t(15);
  uint64_t* p = reinterpret_cast<uint64_t*>(top);
  *--p = reinterpret_cast<uint64_t>(&mk_fiber_trampoline);  // return address
  *--p = 0;                                                 // rbp
  *--p = 0;                                                 // rbx
  *--p = reinterpret_cast<uint64_t>(a);                     // r12
  *--p = reinterpret_cast<uint64_t>(b);                     // r13
  *--p = reinterpret_cast<uint64_t>(fn);                    // r14
  *--p = 0;                                                 // r15
  c->sp = p;
}
inline void switch_context(Context* from, Context* to) { mk_switch(&from->sp, to->sp); }
#else
struct Context {
  ucontext_t uc;
};
void make_context(Context* c, const Stack& s, FiberMain fn, void* a, void* b) {
  getcontext(&c->uc);
  c->uc.uc_stack.ss_sp = s.base + kGuard;
  c->uc.uc_stack.ss_size = kStackSize;
  c->uc.uc_link = nullptr;
  // makecontext passes ints; split the pointers.
  makecontext(&c->uc, (void (*)())fn, 2, a, b);
}
inline void switch_context(Context* from, Context* to) { swapcontext(&from->uc, &to->uc); }
#endif

// ------------------------------------------------------------ the group --

enum ThreadState : uint8_t { NEW, READY, RUNNING, AT_BARRIER, AT_SIMD, DONE };

struct Thread {
  ThreadState state = DONE;
  Context ctx;
  Run run;
  SimdCall* call = nullptr;
  uintptr_t site = 0;   // innermost call site (orders competing sites)
  uintptr_t depth = 0;  // stack depth at the call
  uintptr_t path = 0;   // hash of the whole call path (groups lanes)
  SimdLanes* lanes_for_leader = nullptr;
  uintptr_t stack_top = 0;  // of the fiber this thread runs on
};

struct ErrorInfo {
  int32_t kind;  // 0 none, 1 memory fault, 2 arithmetic, 3 runtime, 4 trap
  int32_t signal;
  uint64_t address;
  uint32_t thread[3];
  uint32_t group[3];
  char message[512];
};

struct Dispatch;

struct Worker {
  sigjmp_buf abort_jmp;
  uint32_t index = 0;  // in the pool
  void* slots[MK_WORKER_SLOTS] = {};  // Run::worker: kept for the kernel libraries
  volatile sig_atomic_t in_kernel = 0;
  pthread_t self;
  // Set when a cancelled dispatch stopped this worker inside the kernel:
  // the group it was running, and the thread when it is known (fibers).
  volatile sig_atomic_t stopped = 0;
  uint32_t stopped_group[3];
  uint32_t stopped_thread[3];
  Dispatch* dispatch = nullptr;
  uint32_t flags = 0;  // of the current dispatch
  uint64_t chunk_end = 0;   // end of the chunk of groups being run
  uint32_t coalesced = 0;   // groups the last run_group call covered beyond its own
  int start_cpu = -1;       // where this worker started its last dispatch (pool threads)
  uint64_t serial = 0;      // ... and which dispatch that was

  // The threadgroup being run.
  EntryFn entry = nullptr;
  const Launch* launch = nullptr;
  bool fiber_mode = false;
  uint32_t nthreads = 0;
  uint32_t running = 0;  // index of the running thread (fiber mode)
  Run run0;              // the direct-mode run
  Context sched;         // the scheduler's own context
  Context direct_ctx;    // fiber 0's context before the upgrade
  Thread threads[MK_MAX_THREADS_PER_GROUP];
  Stack stacks[MK_MAX_THREADS_PER_GROUP + 1];  // fiber 0 + one per thread
  SimdLanes lanes[MK_MAX_THREADS_PER_GROUP / MK_SIMD_WIDTH];

  // Threadgroup memory (as large as a CUDA block's; Metal dispatches use
  // the first MK_MAX_TG_MEMORY bytes).
  alignas(64) char tg_memory[MK_MAX_CUDA_SHARED_MEMORY];
  size_t tg_used = 0;
  void* tg_slots[MK_MAX_TG_SLOTS] = {};
  uint32_t tg_slots_hi = 0;  // slots below this may be set (cleared per group)
  // Keyed allocations (slot >= MK_TG_KEYED_SLOTS), looked up by key.
  uint32_t tg_keys[MK_MAX_TG_SLOTS];
  void* tg_keyed[MK_MAX_TG_SLOTS];
  uint32_t ntg_keys = 0;
  GroupInfo group_info;  // MK_TG_GROUP_INFO
  void* tg_buffers[64];

  Stack& stack(uint32_t i) {
    if (!stacks[i].base) stacks[i] = new_stack();
    return stacks[i];
  }
};

// initial-exec: this library is dlopen'ed, and the default TLS model would
// call __tls_get_addr on every barrier and simd call.
__attribute__((tls_model("initial-exec"))) thread_local Worker* tls_worker = nullptr;

[[noreturn]] void fail(Worker* w, int kind, const char* fmt, ...);

Thread& current_thread(Worker* w) { return w->threads[w->running]; }

// Position of a thread, for error reports.
void thread_position(Worker* w, uint32_t lin, uint32_t out[3]) {
  const u3 gs = w->run0.group_size;
  const u3 d = w->launch->threads_per_threadgroup;
  const u3 tg = w->run0.threadgroup_position;
  out[0] = tg.x * d.x + lin % gs.x;
  out[1] = tg.y * d.y + (lin / gs.x) % gs.y;
  out[2] = tg.z * d.z + lin / (gs.x * gs.y);
}

uint32_t running_linear(Worker* w) {
  return w->fiber_mode ? w->running
                       : static_cast<uint32_t>(reinterpret_cast<uintptr_t>(w->run0.current));
}

void yield_to_next(Worker* w, Context* save);

void fiber_main(void* wp, void* runp) {
  Worker* w = static_cast<Worker*>(wp);
  Run* run = static_cast<Run*>(runp);
  w->entry(run);
  // A finished fiber never runs again.
  Context dead;
  if (w->fiber_mode) {
    current_thread(w).state = DONE;
    yield_to_next(w, &dead);
  } else {
    switch_context(&dead, &w->sched);
  }
  __builtin_unreachable();
}

// First synchronising call of a direct-mode group: continue on fibers.
void upgrade(Worker* w) {
  if (w->flags & (MK_DISPATCH_NEVER_SYNCS | MK_DISPATCH_NO_FIBER))  // not on a fiber: cannot switch
    fail(w, 3, "internal error: a kernel run without fibers synchronised through the fiber scheduler");
  const uint32_t k = running_linear(w);
  w->fiber_mode = true;
  w->run0.upgraded = reinterpret_cast<const void*>(1);
  for (uint32_t t = 0; t < k; ++t) w->threads[t].state = DONE;
  Thread& th = w->threads[k];
  th.state = RUNNING;
  th.stack_top = reinterpret_cast<uintptr_t>(w->stacks[0].top());
  for (uint32_t t = k + 1; t < w->nthreads; ++t) w->threads[t].state = NEW;
  w->running = k;
}

// Index of the next thread to run after `from` (NEW threads get their
// fiber here), or -1 when every thread waits or has finished.
int64_t next_ready(Worker* w, uint32_t from);

// Switches from the running thread (whose state the caller has set) straight
// to the next ready one: one context switch per thread per barrier, the
// scheduler only runs when everyone waits.
void yield_to_next(Worker* w, Context* save) {
  const int64_t next = next_ready(w, w->running + 1);
  if (next < 0) {
    switch_context(save, &w->sched);
    return;
  }
  w->running = uint32_t(next);
  w->threads[next].state = RUNNING;
  switch_context(save, &w->threads[next].ctx);
}

// Blocks the running thread; returns when it is resumed.
void block(Worker* w, ThreadState s) {
  Thread& th = current_thread(w);
  th.state = s;
  // Thread k of an upgraded group still runs on fiber 0's stack and context.
  yield_to_next(w, &th.ctx);
}

// Depth of the caller's frame on its fiber stack: with the call site it
// identifies "the same call" across lanes (same code, same call path).
uintptr_t stack_depth(const Thread& th) {
  return th.stack_top - reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
}

// Kernels and this library keep frame pointers, so the chain of return
// addresses on the fiber's stack names the call path exactly: the same
// helper function reached from two branches gives two different paths.
__attribute__((noinline)) uintptr_t call_path(const Thread& th, uintptr_t site) {
  uintptr_t h = site;
  const uintptr_t lo = th.stack_top - kStackSize;
  void** fp = static_cast<void**>(__builtin_frame_address(0));
  for (int d = 0; d < 256; ++d) {
    const uintptr_t f = reinterpret_cast<uintptr_t>(fp);
    if (f < lo || f + 2 * sizeof(void*) > th.stack_top) break;
    h = h * 0x9E3779B97F4A7C15ull + reinterpret_cast<uintptr_t>(fp[1]);
    void** next = static_cast<void**>(fp[0]);
    if (reinterpret_cast<uintptr_t>(next) <= f) break;
    fp = next;
  }
  return h;
}

void api_barrier(uint32_t flags, uintptr_t site) {
  Worker* w = tls_worker;
  if (!w->fiber_mode) upgrade(w);
  Thread& th = current_thread(w);
  th.site = site;
  (void)flags;
  block(w, AT_BARRIER);
}

SimdLanes* api_simd_sync(SimdCall* call, uintptr_t site) {
  Worker* w = tls_worker;
  if (!w->fiber_mode) upgrade(w);
  Thread& th = current_thread(w);
  th.call = call;
  th.site = site;
  th.depth = stack_depth(th);
  th.path = call_path(th, site);
  th.lanes_for_leader = nullptr;
  block(w, AT_SIMD);
  return current_thread(w).lanes_for_leader;
}

void** keyed_slot(Worker* w, uint32_t key) {
  for (uint32_t i = 0; i < w->ntg_keys; ++i)
    if (w->tg_keys[i] == key) return &w->tg_keyed[i];
  if (w->ntg_keys == MK_MAX_TG_SLOTS) fail(w, 3, "too many shared variables (more than %d)", MK_MAX_TG_SLOTS);
  w->tg_keys[w->ntg_keys] = key;
  w->tg_keyed[w->ntg_keys] = nullptr;
  return &w->tg_keyed[w->ntg_keys++];
}

void* api_threadgroup_alloc(uint32_t slot, size_t size, size_t align) {
  Worker* w = tls_worker;
  if (slot == MK_TG_GROUP_INFO) return &w->group_info;
  void** p;
  if (slot >= MK_TG_KEYED_SLOTS) {
    p = keyed_slot(w, slot);
  } else {
    if (slot >= MK_MAX_TG_SLOTS) fail(w, 3, "too many threadgroup variables (more than %d)", MK_MAX_TG_SLOTS);
    p = &w->tg_slots[slot];
    if (slot >= w->tg_slots_hi) w->tg_slots_hi = slot + 1;
  }
  if (!*p) {
    size_t at = (w->tg_used + align - 1) & ~(align - 1);
    if ((w->flags & MK_DISPATCH_CUDA) && at + size > MK_MAX_CUDA_SHARED_MEMORY)
      fail(w, 3,
           "shared memory exhausted: the block needs more than %d bytes "
           "(a block of an H100/H200 has at most %d)",
           int(at + size), MK_MAX_CUDA_SHARED_MEMORY);
    if (!(w->flags & MK_DISPATCH_CUDA) && at + size > MK_MAX_TG_MEMORY)
      fail(w, 3,
           "threadgroup memory exhausted: the kernel needs more than %d bytes "
           "(Metal devices offer %d)",
           int(at + size), MK_MAX_TG_MEMORY);
    *p = w->tg_memory + at;
    w->tg_used = at + size;
  }
  return *p;
}

void api_fail(const char* message) { fail(tls_worker, 3, "%s", message); }

uint32_t api_thread_index() { return running_linear(tls_worker); }

const RuntimeApi kApi = {MK_ABI_VERSION, api_barrier,  api_simd_sync, api_threadgroup_alloc,
                         api_fail,       api_thread_index};

int64_t next_ready(Worker* w, uint32_t from) {
  for (uint32_t t = from; t < w->nthreads; ++t) {
    Thread& th = w->threads[t];
    if (th.state == NEW) {
      th.run = w->run0;
      th.run.begin = t;
      th.run.end = t + 1;
      th.run.upgraded = reinterpret_cast<const void*>(1);
      const Stack& st = w->stack(t + 1);
      th.stack_top = reinterpret_cast<uintptr_t>(st.top());
      make_context(&th.ctx, st, fiber_main, w, &th.run);
      th.state = READY;
    }
    if (th.state == READY) return t;
  }
  return -1;
}

// A simdgroup's lanes as the named-participant rules see them (mk/named_sync.h).
named::Lanes named_lanes(Worker* w, uint32_t lo, uint32_t hi) {
  named::Lanes nl;
  nl.waiting = nl.gone = 0;
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
    const uint32_t t = lo + i;
    if (t >= hi || w->threads[t].state == DONE) {
      nl.gone |= 1u << i;
      continue;
    }
    const Thread& th = w->threads[t];
    if (th.state == AT_SIMD && named::is_named(th.call->op)) {
      nl.waiting |= 1u << i;
      nl.ops[i] = th.call->op;
      nl.masks[i] = th.call->arg;
    }
  }
  return nl;
}

// Lanes of simdgroup s at named operations (CUDA warp functions) whose masks
// are complete: they compute together, the lowest of them for all.
bool resolve_named(Worker* w, uint32_t s, uint32_t lo, uint32_t hi) {
  const named::Lanes nl = named_lanes(w, lo, hi);
  uint32_t leader = 0;
  const uint32_t p = nl.waiting ? named::complete_group(nl, &leader) : 0;
  if (!p) return false;
  SimdLanes& l = w->lanes[s];
  memset(&l, 0, sizeof l);
  l.count = hi - lo;
  l.active_mask = p;
  for (uint32_t i = 0; i < MK_SIMD_WIDTH; ++i) {
    if (!((p >> i) & 1u)) continue;
    Thread& th = w->threads[lo + i];
    l.lane[i] = th.call;
    th.state = READY;
  }
  w->threads[lo + uint32_t(__builtin_ctz(p))].lanes_for_leader = &l;
  return true;
}

// Nothing can go on while a lane waits at a named operation: a GPU would hang.
[[noreturn]] void named_deadlock(Worker* w, uint32_t lo, uint32_t hi) {
  const named::Lanes nl = named_lanes(w, lo, hi);
  char msg[400];
  const uint32_t lane = named::stuck_message(nl, lo, msg, sizeof msg, [&](uint32_t j) {
    return w->threads[lo + j].state == AT_BARRIER ? "waits at a block-wide barrier (__syncthreads)"
                                                  : "waits at another simdgroup operation";
  });
  w->running = lo + lane;
  fail(w, 3, "%s", msg);
}

// Runs every ready fiber, then resolves simdgroup calls and barriers.
void schedule(Worker* w) {
  const uint32_t n = w->nthreads;
  for (;;) {
    // Run every ready thread: they hand over to each other directly and
    // come back here when all of them wait (or are done).
    const int64_t first = next_ready(w, 0);
    if (first >= 0) {
      w->running = uint32_t(first);
      w->threads[first].state = RUNNING;
      switch_context(&w->sched, &w->threads[first].ctx);
    }
    bool resolved = false;
    const uint32_t nsimd = (n + MK_SIMD_WIDTH - 1) / MK_SIMD_WIDTH;
    for (uint32_t s = 0; s < nsimd; ++s) {
      const uint32_t lo = s * MK_SIMD_WIDTH;
      const uint32_t hi = lo + MK_SIMD_WIDTH < n ? lo + MK_SIMD_WIDTH : n;
      if (resolve_named(w, s, lo, hi)) {
        resolved = true;
        continue;
      }
      // Lanes blocked on the same call path form the active set; of
      // several, the lowest call site goes first (it is usually the earlier
      // code, e.g. a loop body before the code after the loop).
      bool found = false;
      uintptr_t site = 0, depth = 0, path = 0;
      for (uint32_t t = lo; t < hi; ++t) {
        const Thread& th = w->threads[t];
        if (th.state != AT_SIMD || named::is_named(th.call->op)) continue;
        if (!found || th.site < site || (th.site == site && th.depth < depth)) {
          site = th.site;
          depth = th.depth;
          path = th.path;
          found = true;
        }
      }
      if (!found) continue;
      SimdLanes& l = w->lanes[s];
      memset(&l, 0, sizeof l);
      l.count = hi - lo;
      Thread* leader = nullptr;
      for (uint32_t t = lo; t < hi; ++t) {
        Thread& th = w->threads[t];
        if (th.state == AT_SIMD && th.path == path && !named::is_named(th.call->op)) {
          l.lane[t - lo] = th.call;
          l.active_mask |= 1u << (t - lo);
          th.state = READY;
          if (!leader) leader = &th;
        }
      }
      leader->lanes_for_leader = &l;
      resolved = true;
    }
    if (resolved) continue;
    for (uint32_t lo = 0; lo < n; lo += MK_SIMD_WIDTH) {
      const uint32_t hi = lo + MK_SIMD_WIDTH < n ? lo + MK_SIMD_WIDTH : n;
      if (named_lanes(w, lo, hi).waiting) named_deadlock(w, lo, hi);
    }
    bool waiting = false;
    for (uint32_t t = 0; t < n; ++t) {
      if (w->threads[t].state == AT_BARRIER) {
        w->threads[t].state = READY;
        waiting = true;
      }
    }
    if (!waiting) return;  // every thread is done
  }
}

void run_group(Worker* w, uint64_t index) {
  const Launch* l = w->launch;
  const u3 ng = l->threadgroups_per_grid;
  const u3 d = l->threads_per_threadgroup;
  const u3 tg = {uint32_t(index % ng.x), uint32_t((index / ng.x) % ng.y),
                 uint32_t(index / (uint64_t(ng.x) * ng.y))};
  auto extent = [](uint32_t grid, uint32_t pos, uint32_t size) {
    const uint64_t start = uint64_t(pos) * size;
    return uint32_t(grid - start < size ? grid - start : size);
  };
  const u3 gs = {extent(l->threads_per_grid.x, tg.x, d.x), extent(l->threads_per_grid.y, tg.y, d.y),
                 extent(l->threads_per_grid.z, tg.z, d.z)};
  w->nthreads = gs.x * gs.y * gs.z;
  w->fiber_mode = false;
  w->running = 0;
  memset(w->tg_slots, 0, sizeof(void*) * w->tg_slots_hi);
  w->tg_slots_hi = 0;
  w->ntg_keys = 0;
  w->tg_used = 0;
  for (uint32_t i = 0; i < l->ntg_buffers && i < 64; ++i) {
    size_t at = (w->tg_used + 15) & ~size_t(15);
    w->tg_buffers[i] = w->tg_memory + at;
    w->tg_used = at + l->tg_buffer_sizes[i];
  }
  w->group_info.threadgroup_position = tg;
  w->group_info.threads_per_threadgroup = d;
  w->group_info.threadgroups_per_grid = ng;
  w->group_info.tg_buffer0 = l->ntg_buffers ? w->tg_buffers[0] : nullptr;
  Run& r = w->run0;
  r.group = reinterpret_cast<Group*>(w);
  r.launch = l;
  r.threadgroup_position = tg;
  r.group_size = gs;
  r.begin = 0;
  r.end = w->nthreads;
  r.current = nullptr;
  r.upgraded = nullptr;
  r.tg_buffers = w->tg_buffers;
  r.group_count = 1;
  r.worker = w->slots;
  if (w->flags & MK_DISPATCH_COALESCE) {
    // Full groups that follow in the same row join this call.
    const uint64_t last = w->chunk_end;
    uint32_t k = 1;
    while (index + k < last && tg.x + k < ng.x &&
           uint64_t(tg.x + k + 1) * d.x <= l->threads_per_grid.x)
      ++k;
    if (gs.x == d.x) r.group_count = k;
    w->coalesced = r.group_count - 1;
  }
  if (w->flags & (MK_DISPATCH_NEVER_SYNCS | MK_DISPATCH_NO_FIBER)) {
    // A kernel proved never to synchronise, or a work-item driver that will
    // not fall back to fibers, needs no fiber: run it on this stack (a
    // fault still unwinds to work()'s sigsetjmp).
    w->entry(&r);
    return;
  }
  make_context(&w->direct_ctx, w->stack(0), fiber_main, w, &r);
  switch_context(&w->sched, &w->direct_ctx);
  if (w->fiber_mode) {
    // The upgrading thread's saved context lives in threads[k].ctx now.
    schedule(w);
  }
}

// ------------------------------------------------------------- dispatch --

struct Dispatch {
  EntryFn entry;
  const Launch* launch;
  uint64_t ngroups;
  // Launch::order: group k of the counter runs as group (mul * k + add) % ngroups.
  uint64_t mul, add;
  uint32_t flags;   // MK_DISPATCH_*
  uint64_t chunk;   // groups taken per atomic increment
  uint64_t next;    // next group index (atomic)
  int failed;       // set once (atomic)
  int cancel;       // 0, or why the watchdog stopped it: kErrTimeout / kErrInterrupted
  ErrorInfo* error;
  pthread_mutex_t error_mutex;
  pthread_t caller;     // the thread that called mkrt_dispatch
  uint64_t start_ns;    // on the monotonic clock
  uint64_t timeout_ms;  // 0: none
  uint64_t serial;           // Pool::serial: which dispatch this is
  uint64_t caller_until_ns;  // the caller runs groups alone until then (0: to the end)
  uint64_t busy_ns;          // time its participants spent in work() (atomic)
};

void record_error(Worker* w, int kind, int sig, uint64_t addr, const char* msg) {
  Dispatch* d = w->dispatch;
  pthread_mutex_lock(&d->error_mutex);
  if (__atomic_exchange_n(&d->failed, 1, __ATOMIC_SEQ_CST)) {  // keep the first error
    pthread_mutex_unlock(&d->error_mutex);
    return;
  }
  ErrorInfo* e = d->error;
  e->kind = kind;
  e->signal = sig;
  e->address = addr;
  thread_position(w, running_linear(w), e->thread);
  e->group[0] = w->run0.threadgroup_position.x;
  e->group[1] = w->run0.threadgroup_position.y;
  e->group[2] = w->run0.threadgroup_position.z;
  snprintf(e->message, sizeof e->message, "%s", msg);
  pthread_mutex_unlock(&d->error_mutex);
}

[[noreturn]] void fail(Worker* w, int kind, const char* fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  record_error(w, kind, 0, 0, msg);
  siglongjmp(w->abort_jmp, 1);
}

// --------------------------------------------------------------- signals --

const int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP};
struct sigaction g_previous[32];

void on_fault(int sig, siginfo_t* info, void* uctx) {
  Worker* w = tls_worker;
  if (!w || !w->in_kernel) {
    // Not ours: hand the signal to whoever had it before.
    const struct sigaction& prev = g_previous[sig];
    if (prev.sa_flags & SA_SIGINFO) {
      if (prev.sa_sigaction) prev.sa_sigaction(sig, info, uctx);
      return;
    }
    if (prev.sa_handler == SIG_IGN) return;
    if (prev.sa_handler == SIG_DFL || prev.sa_handler == nullptr) {
      signal(sig, SIG_DFL);
      raise(sig);
      return;
    }
    prev.sa_handler(sig);
    return;
  }
  const char* what = "fault";
  int kind = 1;
  switch (sig) {
    case SIGSEGV:
      what = "invalid memory access (segmentation fault)";
      break;
    case SIGBUS:
      what = "misaligned or invalid memory access (bus error)";
      break;
    case SIGFPE:
      kind = 2;
      what = info->si_code == FPE_INTDIV ? "integer division by zero or overflow (INT_MIN / -1)"
             : info->si_code == FPE_INTOVF ? "integer division overflow"
                                           : "arithmetic exception";
      break;
    case SIGILL:
    case SIGTRAP:
      kind = 4;
      what = "trap (__builtin_trap / unreachable code reached)";
      break;
  }
  w->in_kernel = 0;
  record_error(w, kind, sig, reinterpret_cast<uint64_t>(info->si_addr), what);
  siglongjmp(w->abort_jmp, 1);
}

// ---------------------------------------------------- stopping a dispatch --
// A kernel that never finishes (`for (uint i = n; i >= 0; --i)`) must not
// take the user's process with it. The dispatching thread waits with a
// deadline and watches for Ctrl-C; to stop, it marks the dispatch cancelled
// and sends each worker kStopSignal, whose handler leaves the kernel the way
// a fault does (siglongjmp to the worker's loop; the group is abandoned).

constexpr int kErrTimeout = 5;
constexpr int kErrInterrupted = 6;

int stop_signal() { return SIGRTMIN + 6; }

void on_stop(int, siginfo_t*, void*) {
  Worker* w = tls_worker;
  // Outside kernel code (between groups, recording an error, waiting for
  // work) the worker notices the cancelled dispatch by itself.
  if (!w || !w->in_kernel || !w->dispatch || !__atomic_load_n(&w->dispatch->cancel, __ATOMIC_RELAXED)) return;
  w->in_kernel = 0;
  w->stopped_group[0] = w->run0.threadgroup_position.x;
  w->stopped_group[1] = w->run0.threadgroup_position.y;
  w->stopped_group[2] = w->run0.threadgroup_position.z;
  if (w->fiber_mode) {
    thread_position(w, w->running, w->stopped_thread);
  } else {  // direct loops and work-item loops do not track the running thread
    w->stopped_thread[0] = w->stopped_thread[1] = w->stopped_thread[2] = 0xFFFFFFFFu;
  }
  w->stopped = 1;
  siglongjmp(w->abort_jmp, 1);
}

// Ctrl-C during a dispatch: noted for the dispatcher, then handed to the
// handler installed before (Python's, which raises KeyboardInterrupt once
// the dispatch returns).
volatile sig_atomic_t g_sigint_seen = 0;
struct sigaction g_previous_sigint;

void on_sigint(int sig, siginfo_t* info, void* uctx) {
  g_sigint_seen = 1;
  const struct sigaction& prev = g_previous_sigint;
  if (prev.sa_flags & SA_SIGINFO) {
    if (prev.sa_sigaction) prev.sa_sigaction(sig, info, uctx);
  } else if (prev.sa_handler != SIG_IGN && prev.sa_handler != SIG_DFL && prev.sa_handler) {
    prev.sa_handler(sig);
  }
}

void install_stop_handlers() {
  struct sigaction cur;
  sigaction(stop_signal(), nullptr, &cur);
  if (!((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_stop)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_stop;
    // Blocked while its handler runs (the abort path in work() unblocks it).
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(stop_signal(), &sa, nullptr);
  }
  // Chain to SIGINT only when someone handles it: with the default action
  // Ctrl-C ends the process, as the user expects; ignored stays ignored.
  sigaction(SIGINT, nullptr, &cur);
  const bool ours = (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_sigint;
  const bool handled = (cur.sa_flags & SA_SIGINFO) ? cur.sa_sigaction != nullptr
                                                   : (cur.sa_handler != SIG_DFL && cur.sa_handler != SIG_IGN);
  if (!ours && handled) {
    g_previous_sigint = cur;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigint;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | (cur.sa_flags & SA_RESTART);
    sa.sa_mask = cur.sa_mask;
    sigaction(SIGINT, &sa, nullptr);
  }
}

void install_handlers() {
  for (int sig : kSignals) {
    struct sigaction cur;
    sigaction(sig, nullptr, &cur);
    if ((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == on_fault) continue;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    g_previous[sig] = cur;
    sigaction(sig, &sa, nullptr);
  }
}

// ------------------------------------------------------------------ pool --

// A small dispatch runs on the thread that calls mkrt_dispatch, with no
// hand-over: waking a pool thread and being woken by it costs an
// inter-processor wake-up each way (tens of µs on a VM, more than many
// kernels take), while letting the caller work beside the woken threads
// lost more than it gained where the scheduler put a woken thread on the
// caller's own CPU (KVM guests see their idle vCPUs as preempted). So the
// caller runs a dispatch alone when it has one group, or when the kernel's
// earlier dispatches predict less than kAloneNs of work; if its groups
// outlast that by far (the prediction was wrong) it hands the rest to the
// pool. Every other dispatch goes to the pool at once, the caller waiting.
// A watchdog thread enforces the deadline and Ctrl-C either way.
struct Pool {  // calloc'ed and initialised in mkrt_init
  pthread_mutex_t m;
  pthread_cond_t wake, done, watch;
  int nthreads;  // the dispatch's parallelism: the pool's threads, or 1 (the caller)
  int nworkers;  // worker states: the caller's and the pool threads'
  Dispatch* job;      // the dispatch the pool may join; null when none
  Dispatch* watched;  // the dispatch running (the watchdog's)
  uint64_t generation;
  int active;    // pool threads inside `job`
  bool caller_waiting;
  bool watchdog_parked;
  uint64_t last_dispatch_ns;  // when the last one ended (the watchdog parks after a second idle)
  uint64_t serial;            // dispatches so far
  int pin_mode;               // METAL_KERNEL_PIN_THREADS: 0 never, 1 at start, else (-1) when seen sharing
  int shared_cpu_seen;        // pool dispatches whose threads started on one CPU
  bool pinned;
  pthread_mutex_t dispatch_mutex;  // one dispatch at a time
  // [0]: the caller's (used by whichever thread holds dispatch_mutex), then
  // one per pool thread; nworkers entries once every thread has started.
  Worker** workers;
  int registered;
  char* caller_alt_stack;  // for a caller without an alternate signal stack
};

// A kernel's work per grid thread, from its last dispatch (direct-mapped by
// the entry point; only the thread holding dispatch_mutex touches it).
struct Estimate {
  EntryFn entry;
  uint64_t ps_per_thread;  // picoseconds
};
constexpr int kEstimates = 256;
Estimate g_estimates[kEstimates];
// How dispatches ran: on the caller alone, handed over by it, or on the
// pool (mkrt_dispatch_counts; the tests read them).
uint64_t g_counts[3];
constexpr uint64_t kAloneNs = 50000;          // predicted work the caller takes alone
constexpr uint64_t kAloneHandoverNs = 200000;  // when it gives up on a wrong prediction

inline Estimate& estimate_slot(EntryFn entry) {
  const uintptr_t h = reinterpret_cast<uintptr_t>(entry);
  return g_estimates[((h >> 4) ^ (h >> 12)) % kEstimates];
}

constexpr size_t kAltStackSize = 1 << 16;

Pool* g_pool = nullptr;

// (a + b) mod n for a, b < n.
inline uint64_t addmod(uint64_t a, uint64_t b, uint64_t n) { return a >= n - b ? a - (n - b) : a + b; }

// The group the counter's k-th group stands for (Launch::order).
inline uint64_t group_at(const Dispatch* d, uint64_t k) {
  if (d->mul == 1 && d->add == 0) return k;
  const uint64_t n = d->ngroups;
  if (d->mul == n - 1) return (d->add + n - k % n) % n;  // -k + add: reversed when add = n - 1
  // (mul * k) mod n without 128-bit division (no compiler runtime here)
  uint64_t r = 0, a = d->mul % n, b = k % n;
  while (b) {
    if (b & 1) r = addmod(r, a, n);
    a = addmod(a, a, n);
    b >>= 1;
  }
  return addmod(r, d->add, n);
}

// The group the counter's (k + 1)-th group stands for, `group` the k-th's:
// one step of the permutation, not group_at's loop.
inline uint64_t group_after(const Dispatch* d, uint64_t k, uint64_t group) {
  if (d->mul == 1 && d->add == 0) return k + 1;
  return addmod(group, d->mul, d->ngroups);
}

// A shuffled order leaves the hardware prefetchers nothing to follow, and
// a kernel that streams through memory waits for every group's first
// loads. Most kernels' groups read the slice of each buffer their index
// gives (group g of n: bytes [g, g + 1) * size / n): the start of those
// slices of the group that runs next is fetched ahead (a hint: it never
// faults, and changes no result).
inline void prefetch_slices(const Dispatch* d, uint64_t group) {
  constexpr uint64_t kLine = 64, kMaxBytes = 2048;
  const Launch* l = d->launch;
  for (uint32_t i = 0; i < l->nbuffers; ++i) {
    const uint64_t per = l->buffer_sizes[i] / d->ngroups;
    if (per < kLine) continue;  // a line serves several groups: the prefetchers keep up
    const char* p = static_cast<const char*>(l->buffers[i]) + group * per;
    const uint64_t n = per < kMaxBytes ? per : kMaxBytes;
    for (uint64_t o = 0; o < n; o += kLine) __builtin_prefetch(p + o);
  }
}

uint64_t monotonic_ns() {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return uint64_t(t.tv_sec) * 1000000000ull + uint64_t(t.tv_nsec);
}

inline bool skipped(const Launch* l, uint64_t group) {
  for (uint32_t i = 0; i < l->nskip; ++i)
    if (l->skip[i] == group) return true;
  return false;
}

#if defined(__linux__)
inline int current_cpu() { return sched_getcpu(); }
#else
inline int current_cpu() { return -1; }
#endif

// Runs groups of `d` until none is left (or the dispatch failed); the caller
// (index 0) also stops at d->caller_until_ns, to hand the rest to the pool.
// Adds the time spent to d->busy_ns: the dispatch's work, for the estimate.
void work(Worker* w, Dispatch* d) {
  // max_workers: the caller alone when 1; else that many pool threads.
  const uint32_t most = d->launch->max_workers;
  if (w->index && most && (most == 1 || w->index > most)) return;
  const uint64_t start = monotonic_ns();
  if (w->index) {
    w->start_cpu = current_cpu();
    w->serial = d->serial;
  }
  w->dispatch = d;
  w->flags = d->flags;
  w->entry = d->entry;
  w->launch = d->launch;
  for (;;) {
    if (__atomic_load_n(&d->failed, __ATOMIC_RELAXED)) break;
    if (w->index == 0 && d->caller_until_ns && monotonic_ns() >= d->caller_until_ns) break;
    const uint64_t first = __atomic_fetch_add(&d->next, d->chunk, __ATOMIC_RELAXED);
    if (first >= d->ngroups) break;
    const uint64_t last = first + d->chunk < d->ngroups ? first + d->chunk : d->ngroups;
    // No signal mask saved here (that is a system call per group); the
    // abort path unblocks the fault signals itself.
    if (sigsetjmp(w->abort_jmp, 0) == 0) {
      w->in_kernel = 1;
      w->chunk_end = last;
      const bool prefetch = d->launch->order == MK_ORDER_SHUFFLE;
      for (uint64_t g = first, group = group_at(d, g); g < last; ++g) {
        if (__atomic_load_n(&d->failed, __ATOMIC_RELAXED)) break;
        w->coalesced = 0;
        const uint64_t next = group_after(d, g, group);
        if (prefetch && g + 1 < last) prefetch_slices(d, next);
        if (!d->launch->nskip || !skipped(d->launch, group)) run_group(w, group);
        g += w->coalesced;
        group = w->coalesced ? g + 1 : next;  // groups coalesce in the default order only
      }
      w->in_kernel = 0;
    } else {
      w->in_kernel = 0;
      sigset_t faults;
      sigemptyset(&faults);
      for (int sig : kSignals) sigaddset(&faults, sig);
      sigaddset(&faults, stop_signal());
      pthread_sigmask(SIG_UNBLOCK, &faults, nullptr);
      break;  // the group was abandoned; its fibers are reset next time
    }
  }
#if defined(__x86_64__)
  // Kernels may write with non-temporal stores (runtime/streaming.py),
  // which are weakly ordered: make them visible before reporting done.
  __builtin_ia32_sfence();
#endif
  __atomic_fetch_add(&d->busy_ns, monotonic_ns() - start, __ATOMIC_RELAXED);
}

// Pins pool thread i to the i-th CPU the caller may run on, when there are
// enough of them. Why: on KVM guests a woken thread is often queued on a CPU
// another pool thread already runs on (an idle vCPU looks preempted to the
// guest's scheduler), and the dispatch then runs on one CPU for milliseconds
// until the load balancer moves it (measured: a third of the time of a
// memory-bound 16M-float kernel in a quarter of the calls after an idle
// period). Done once, by the thread holding dispatch_mutex.
void pin_pool(Pool* p) {
  p->pinned = true;
#if defined(__linux__)
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  int cpus[CPU_SETSIZE];
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpus[n++] = c;
  if (n < p->nworkers - 1) return;  // more threads than CPUs: nothing to gain
  for (int i = 1; i < p->nworkers; ++i) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[i - 1], &one);
    pthread_setaffinity_np(p->workers[i]->self, sizeof one, &one);
  }
#endif
}

// After a pool dispatch (pool mutex held): did two of its threads start on
// one CPU? Twice seen, the pool is pinned (pin_mode -1, the default).
void note_shared_cpu(Pool* p, uint64_t serial) {
  if (p->pinned || p->pin_mode != -1) return;
  for (int i = 1; i < p->nworkers; ++i) {
    const Worker* a = p->workers[i];
    if (a->serial != serial || a->start_cpu < 0) continue;
    for (int j = i + 1; j < p->nworkers; ++j) {
      const Worker* b = p->workers[j];
      if (b->serial == serial && b->start_cpu == a->start_cpu) {
        if (++p->shared_cpu_seen >= 2) pin_pool(p);
        return;
      }
    }
  }
}

// Large (1024 threads and their stacks); every field starts at zero, and
// the threadgroup memory inside is 64-byte aligned.
Worker* new_worker() {
  void* mem = nullptr;
  if (posix_memalign(&mem, 64, sizeof(Worker)) != 0) return nullptr;
  memset(mem, 0, sizeof(Worker));
  return static_cast<Worker*>(mem);
}

// Kernels run in the default floating-point environment on every thread
// (round to nearest, subnormals kept, exceptions masked), whatever the
// caller's thread has set (torch.set_flush_denormal, fesetround): a group
// must not compute differently on the caller than on a pool thread.
#if defined(__x86_64__)
typedef unsigned FpState;
constexpr unsigned kDefaultMxcsr = 0x1F80;
inline FpState enter_default_fp() {
  const unsigned saved = __builtin_ia32_stmxcsr();
  __builtin_ia32_ldmxcsr(kDefaultMxcsr);
  return saved;
}
inline void leave_default_fp(FpState saved) { __builtin_ia32_ldmxcsr(saved); }
#elif defined(__aarch64__)
typedef unsigned long FpState;
inline FpState enter_default_fp() {
  FpState saved;
  __asm__ volatile("mrs %0, fpcr" : "=r"(saved));
  __asm__ volatile("msr fpcr, %0" ::"r"(0ul));
  return saved;
}
inline void leave_default_fp(FpState saved) { __asm__ volatile("msr fpcr, %0" ::"r"(saved)); }
#else
typedef int FpState;
inline FpState enter_default_fp() { return 0; }
inline void leave_default_fp(FpState) {}
#endif

void* worker_main(void* arg) {
  Pool* p = static_cast<Pool*>(arg);
  Worker* w = new_worker();
  pthread_mutex_lock(&p->m);
  if (w) {
    w->self = pthread_self();
    w->index = uint32_t(p->registered);
    p->workers[p->registered] = w;
  }
  p->registered++;  // counted either way, so that mkrt_init stops waiting
  pthread_cond_broadcast(&p->done);
  pthread_mutex_unlock(&p->m);
  if (!w) return nullptr;
  tls_worker = w;
  enter_default_fp();  // a pool thread inherits its creator's environment
  // Faults on a fiber (stack overflow included) are handled on this stack.
  stack_t ss;
  ss.ss_sp = malloc(kAltStackSize);
  ss.ss_size = kAltStackSize;
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
  uint64_t seen = 0;
  for (;;) {
    pthread_mutex_lock(&p->m);
    while (p->generation == seen) pthread_cond_wait(&p->wake, &p->m);
    seen = p->generation;
    Dispatch* d = p->job;
    if (d) p->active++;
    pthread_mutex_unlock(&p->m);
    if (!d) continue;  // woke after the caller closed it: nothing left to take
    work(w, d);
    pthread_mutex_lock(&p->m);
    if (--p->active == 0 && p->caller_waiting) pthread_cond_signal(&p->done);
    pthread_mutex_unlock(&p->m);
  }
  return nullptr;
}

void* watchdog_main(void* arg);

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int mkrt_abi_version() { return MK_ABI_VERSION; }

__attribute__((visibility("default"))) const RuntimeApi* mkrt_api() { return &kApi; }

// Dispatches so far that ran on the caller alone, were handed over to the
// pool by it (a wrong prediction), and ran on the pool; out[3]: pool
// dispatches seen with two threads on one CPU; out[4]: 1 once the pool's
// threads are pinned (pin_pool).
__attribute__((visibility("default"))) void mkrt_dispatch_counts(uint64_t out[5]) {
  memset(out, 0, 5 * sizeof(uint64_t));
  if (!g_pool) return;
  pthread_mutex_lock(&g_pool->dispatch_mutex);
  memcpy(out, g_counts, sizeof g_counts);
  out[3] = uint64_t(g_pool->shared_cpu_seen);
  out[4] = g_pool->pinned;
  pthread_mutex_unlock(&g_pool->dispatch_mutex);
}

// Worker states a dispatch may use (the caller's and each pool thread's):
// what a checked dispatch needs one chk::Group for each of.
__attribute__((visibility("default"))) int mkrt_worker_states() { return g_pool ? g_pool->nworkers : 0; }

__attribute__((visibility("default"))) int mkrt_init(int nthreads) {
  if (g_pool) return g_pool->nthreads;
  if (nthreads <= 0) {
    nthreads = int(sysconf(_SC_NPROCESSORS_ONLN));
    if (nthreads <= 0) nthreads = 1;
  }
  Worker* caller = new_worker();
  char* alt = static_cast<char*>(malloc(kAltStackSize));
  if (!caller || !alt) {
    free(caller);
    free(alt);
    return 0;
  }
  Pool* p = static_cast<Pool*>(calloc(1, sizeof(Pool)));
  p->workers = static_cast<Worker**>(calloc(size_t(nthreads) + 1, sizeof(Worker*)));
  pthread_mutex_init(&p->m, nullptr);
  pthread_cond_init(&p->wake, nullptr);
  pthread_cond_init(&p->done, nullptr);
  pthread_cond_init(&p->watch, nullptr);
  pthread_mutex_init(&p->dispatch_mutex, nullptr);
  p->caller_alt_stack = alt;
  p->workers[0] = caller;
  p->registered = 1;
  int started = 0;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // One participant is the caller alone: no pool to wake.
  for (int i = 0; i < nthreads && nthreads > 1; ++i) {
    pthread_t t;
    if (pthread_create(&t, &attr, worker_main, p) == 0) started++;
  }
  pthread_t t;
  // Should it fail to start, timeouts and Ctrl-C are not enforced (the
  // dispatches themselves run as usual).
  pthread_create(&t, &attr, watchdog_main, p);
  pthread_attr_destroy(&attr);
  // Every pool thread registered before the first dispatch (so it can be
  // stopped); one that could not allocate its worker leaves a gap, closed here.
  pthread_mutex_lock(&p->m);
  while (p->registered < 1 + started) pthread_cond_wait(&p->done, &p->m);
  int n = 0;
  for (int i = 0; i < 1 + started; ++i)
    if (p->workers[i]) {
      p->workers[n] = p->workers[i];
      p->workers[n]->index = uint32_t(n);
      n++;
    }
  p->nworkers = n;
  p->nthreads = n > 1 ? n - 1 : 1;
  const char* pin = getenv("METAL_KERNEL_PIN_THREADS");
  p->pin_mode = pin && pin[0] == '0' && !pin[1] ? 0 : pin && pin[0] == '1' && !pin[1] ? 1 : -1;
  if (p->pin_mode == 1 && n > 1) pin_pool(p);
  pthread_mutex_unlock(&p->m);
  g_pool = p;
  return p->nthreads;
}

namespace {

// Marks the dispatch cancelled (first error wins) and signals every worker
// once. A worker outside kernel code ignores the signal and sees `failed`
// (set before the signal) before it runs another group. Called with the
// pool mutex held.
void stop_dispatch(Dispatch* d, int why, uint64_t timeout_ms) {
  __atomic_store_n(&d->cancel, why, __ATOMIC_SEQ_CST);
  pthread_mutex_lock(&d->error_mutex);
  if (!__atomic_exchange_n(&d->failed, 1, __ATOMIC_SEQ_CST)) {
    ErrorInfo* e = d->error;
    e->kind = why;
    e->thread[0] = e->thread[1] = e->thread[2] = 0xFFFFFFFFu;
    e->group[0] = e->group[1] = e->group[2] = 0xFFFFFFFFu;
    if (why == kErrTimeout)
      snprintf(e->message, sizeof e->message,
               "did not finish within %.3g s and was stopped (an endless loop?)", double(timeout_ms) / 1000.0);
    else
      snprintf(e->message, sizeof e->message, "interrupted (Ctrl-C)");
  }
  pthread_mutex_unlock(&d->error_mutex);
  pthread_kill(d->caller, stop_signal());
  for (int i = 1; i < g_pool->nworkers; ++i) pthread_kill(g_pool->workers[i]->self, stop_signal());
}

// Checks the open dispatch's deadline and Ctrl-C every 50 ms (sooner when
// the deadline is nearer); parks while no dispatch is open. The caller
// wakes it only when it is parked, so back-to-back dispatches cost it at
// most one wake-up per 50 ms.
void* watchdog_main(void* arg) {
  Pool* p = static_cast<Pool*>(arg);
  pthread_mutex_lock(&p->m);
  for (;;) {
    Dispatch* d = p->watched;
    if (!d && monotonic_ns() - p->last_dispatch_ns > 1000000000ull) {
      p->watchdog_parked = true;
      pthread_cond_wait(&p->watch, &p->m);
      p->watchdog_parked = false;
      continue;
    }
    uint64_t wait_ns = 50000000;
    const uint64_t now = monotonic_ns();
    if (!d || d->cancel) {
      // none open, or stopping: the participants leave by themselves
    } else if (g_sigint_seen) {
      stop_dispatch(d, kErrInterrupted, d->timeout_ms);
    } else if (d->timeout_ms) {
      const uint64_t deadline = d->start_ns + d->timeout_ms * 1000000ull;
      if (now >= deadline)
        stop_dispatch(d, kErrTimeout, d->timeout_ms);
      else if (deadline - now < wait_ns)
        wait_ns = deadline - now;
    }
    // The deadline is measured on the monotonic clock; the wait's is on the
    // realtime one, the only clock every pthread_cond_timedwait (this
    // library links against whichever glibc version is oldest) uses.
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t ns = uint64_t(ts.tv_nsec) + wait_ns;
    ts.tv_sec += time_t(ns / 1000000000ull);
    ts.tv_nsec = long(ns % 1000000000ull);
    pthread_cond_timedwait(&p->watch, &p->m, &ts);
  }
  return nullptr;
}

}  // namespace

// Runs one dispatch to completion. Returns 0, or 1 with `error` filled.
// `timeout_ms` (0: none) bounds its wall time; Ctrl-C stops it too. The
// calling thread runs groups itself (Pool).
__attribute__((visibility("default"))) int mkrt_dispatch(EntryFn entry, const Launch* launch,
                                                         ErrorInfo* error, uint32_t flags,
                                                         uint64_t timeout_ms) {
  memset(error, 0, sizeof *error);
  if (!g_pool && mkrt_init(0) == 0) {
    error->kind = 3;
    snprintf(error->message, sizeof error->message, "the runtime could not allocate its workers");
    return 1;
  }
  const uint64_t ngroups = uint64_t(launch->threadgroups_per_grid.x) *
                           launch->threadgroups_per_grid.y * launch->threadgroups_per_grid.z;
  if (ngroups == 0) return 0;
  pthread_mutex_lock(&g_pool->dispatch_mutex);
  install_handlers();
  Dispatch d;
  d.entry = entry;
  d.launch = launch;
  d.ngroups = ngroups;
  d.flags = flags;
  d.mul = 1;
  d.add = 0;
  if (launch->order == MK_ORDER_REVERSE) {
    d.mul = ngroups - 1;  // k -> -k - 1 (mod n)
    d.add = ngroups - 1;
  } else if (launch->order == MK_ORDER_SHUFFLE && ngroups > 1) {
    // An affine permutation: a multiplier coprime with n, an offset, from the seed.
    uint64_t h = uint64_t(launch->seed) * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    h ^= h >> 31;
    uint64_t a = h % ngroups;
    auto gcd = [](uint64_t x, uint64_t y) { while (y) { uint64_t t = x % y; x = y; y = t; } return x; };
    if (a == 0) a = 1;
    while (gcd(a, ngroups) != 1) a = a + 1 < ngroups ? a + 1 : 1;
    d.mul = a;
    d.add = (h >> 17) % ngroups;
  }
  if (d.mul != 1 || d.add != 0 || launch->nskip) d.flags &= ~MK_DISPATCH_COALESCE;  // coalescing needs consecutive groups
  // Several groups per atomic increment when there are many (less traffic
  // on the shared counter), still ~64 chunks per worker for balance.
  d.chunk = ngroups / (uint64_t(g_pool->nthreads) * 64);
  if (d.chunk < 1) d.chunk = 1;
  d.next = 0;
  d.failed = 0;
  d.cancel = 0;
  d.error = error;
  pthread_mutex_init(&d.error_mutex, nullptr);
  install_stop_handlers();
  g_sigint_seen = 0;
  Pool* p = g_pool;
  for (int i = 0; i < p->nworkers; ++i) p->workers[i]->stopped = 0;
  d.caller = pthread_self();
  d.start_ns = monotonic_ns();
  d.timeout_ms = timeout_ms;
  Worker* self = p->workers[0];
  self->self = d.caller;
  tls_worker = self;  // the caller is a worker until the dispatch returns
  // Faults on a fiber (stack overflow included) need an alternate signal
  // stack; the caller's thread gets ours for the dispatch when it has none.
  stack_t old_alt;
  bool alt_swapped = false;
  if (sigaltstack(nullptr, &old_alt) == 0 && ((old_alt.ss_flags & SS_DISABLE) || old_alt.ss_size < kAltStackSize / 4)) {
    stack_t ss;
    ss.ss_sp = p->caller_alt_stack;
    ss.ss_size = kAltStackSize;
    ss.ss_flags = 0;
    alt_swapped = sigaltstack(&ss, nullptr) == 0;
  }
  const FpState fp = enter_default_fp();
  const uint64_t threads = uint64_t(launch->threads_per_grid.x) * launch->threads_per_grid.y *
                           launch->threads_per_grid.z;
  Estimate& est = estimate_slot(entry);
  const bool known = est.entry == entry;
  const bool pool = p->nworkers > 1 && launch->max_workers != 1;
  const bool alone = !pool || ngroups == 1 || (known && est.ps_per_thread < kAloneNs * 1000 / threads);
  // A wrong prediction hands over; one group, or no pool, has nobody to hand to.
  d.caller_until_ns = alone && pool && ngroups > 1 ? d.start_ns + kAloneHandoverNs : 0;
  d.busy_ns = 0;
  d.serial = ++p->serial;
  pthread_mutex_lock(&p->m);
  p->watched = &d;
  if (p->watchdog_parked) pthread_cond_signal(&p->watch);
  pthread_mutex_unlock(&p->m);
  if (alone) work(self, &d);
  pthread_mutex_lock(&p->m);
  const bool left = __atomic_load_n(&d.next, __ATOMIC_RELAXED) < ngroups && !__atomic_load_n(&d.failed, __ATOMIC_RELAXED);
  g_counts[!alone ? 2 : left ? 1 : 0]++;
  if (left) {
    p->job = &d;  // groups left: the pool's
    p->active = 0;
    p->generation++;
    pthread_cond_broadcast(&p->wake);
    p->caller_waiting = true;
    // A pool thread joins (active > 0) before it takes a group, so once
    // the counter is past the end every group taken is accounted for.
    while (p->active != 0 || (__atomic_load_n(&d.next, __ATOMIC_RELAXED) < ngroups &&
                              !__atomic_load_n(&d.failed, __ATOMIC_RELAXED)))
      pthread_cond_wait(&p->done, &p->m);
    p->caller_waiting = false;
    p->job = nullptr;
    note_shared_cpu(p, d.serial);
  }
  p->watched = nullptr;
  p->last_dispatch_ns = monotonic_ns();
  if (d.cancel && error->kind == d.cancel) {
    // Name a group (and thread, when known) that was still running.
    for (int i = 0; i < p->nworkers; ++i) {
      Worker* w = p->workers[i];
      if (!w->stopped) continue;
      memcpy(error->group, w->stopped_group, sizeof error->group);
      memcpy(error->thread, w->stopped_thread, sizeof error->thread);
      break;
    }
  }
  pthread_mutex_unlock(&p->m);
  if (!d.failed && threads) {
    est.entry = entry;
    est.ps_per_thread = d.busy_ns * 1000 / threads;
  }
  leave_default_fp(fp);
  if (alt_swapped) sigaltstack(&old_alt, nullptr);
  tls_worker = nullptr;
  pthread_mutex_destroy(&d.error_mutex);
  pthread_mutex_unlock(&p->dispatch_mutex);
  return d.failed ? 1 : 0;
}

}  // extern "C"
