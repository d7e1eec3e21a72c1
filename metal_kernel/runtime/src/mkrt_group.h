// The threadgroup: fibers, the worker's state, and the scheduler that runs
// one group's threads (direct mode, then fibers for barriers and simd calls).
//
// A part of mkrt.cpp's single translation unit (no header of its own:
// it uses what the parts included before it define), included in order.

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

}  // namespace
