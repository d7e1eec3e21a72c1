// The pool: where a dispatch's groups run (the caller or the pool's threads),
// the work loop, the kernels' work estimates, and pinning.
//
// A part of mkrt.cpp's single translation unit (no header of its own:
// it uses what the parts included before it define), included in order.

namespace {

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
