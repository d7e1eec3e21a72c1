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

// The parts, in order: the threadgroup (fibers and the group scheduler), a
// dispatch's errors (faults, stopping), and the pool (who runs the groups).
// This file holds the library's C entry points and the watchdog.
#include "mkrt_group.h"
#include "mkrt_faults.h"
#include "mkrt_pool.h"

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

// The caller's share of `d`, run on its own thread as worker 0: with the
// runtime's alternate signal stack when the thread has none (faults on a
// fiber, stack overflow included, are handled on it) and in the default
// floating-point environment; both, and tls_worker, restored after.
void run_on_caller(Pool* p, Dispatch* d) {
  Worker* self = p->workers[0];
  self->self = d->caller;
  tls_worker = self;
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
  work(self, d);
  leave_default_fp(fp);
  if (alt_swapped) sigaltstack(&old_alt, nullptr);
  tls_worker = nullptr;
}

}  // namespace

// Runs one dispatch to completion. Returns 0, or 1 with `error` filled.
// `timeout_ms` (0: none) bounds its wall time; Ctrl-C stops it too. The
// calling thread runs small dispatches itself (Pool).
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
  const uint64_t threads = uint64_t(launch->threads_per_grid.x) * launch->threads_per_grid.y *
                           launch->threads_per_grid.z;
  Estimate& est = estimate_slot(entry);
  const bool known = est.entry == entry && threads;
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
  if (alone) run_on_caller(p, &d);
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
  pthread_mutex_destroy(&d.error_mutex);
  pthread_mutex_unlock(&p->dispatch_mutex);
  return d.failed ? 1 : 0;
}

}  // extern "C"
