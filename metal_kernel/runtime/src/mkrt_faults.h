// A dispatch's record and its errors: faults in kernel code, and stopping a
// dispatch (timeouts, Ctrl-C) with a real-time signal.
//
// A part of mkrt.cpp's single translation unit (no header of its own:
// it uses what the parts included before it define), included in order.

namespace {

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
  uint64_t error_group;  // the group `error` names (record_error)
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
  const u3 tg = w->run0.threadgroup_position, ng = d->launch->threadgroups_per_grid;
  const uint64_t group = tg.x + uint64_t(ng.x) * (tg.y + uint64_t(ng.y) * tg.z);
  pthread_mutex_lock(&d->error_mutex);
  // Of the groups that fault, the lowest is reported, not the first in time:
  // groups already running when one faults run on, so a call that faults in
  // several gives the same error whichever thread ran what (a stop's error,
  // d->cancel, stays).
  const bool first = !__atomic_exchange_n(&d->failed, 1, __ATOMIC_SEQ_CST);
  if (!first && (d->cancel || group >= d->error_group)) {
    pthread_mutex_unlock(&d->error_mutex);
    return;
  }
  d->error_group = group;
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

}  // namespace
