// The machine's own limits, measured with as many threads as the runtime's
// pool has: STREAM-style memory kernels and an FMA throughput loop. Built by
// benchmarks/perf/limits.py with the compiler metal-kernel uses and the
// machine class's -march; each call returns the seconds between the moment
// every thread is ready and the moment the last one finished.
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

// One vector register: 16 floats with AVX-512, 8 with AVX2.
#ifdef __AVX512F__
#define VW 16
#else
#define VW 8
#endif
typedef float vf __attribute__((ext_vector_type(VW), aligned(4)));
typedef float vf_aligned __attribute__((ext_vector_type(VW)));  // streaming stores need it

enum { TRIAD = 0, COPY = 1, READ = 2, FMA = 3 };

struct Job {
  int kind, streaming;
  float* a;
  const float* b;
  const float* c;
  float s;
  size_t n;
  long iters;
  int threads;
  atomic_int ready, go, done;
  double sink;
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

static void store(float* p, vf v, int streaming) {
  if (streaming)
    __builtin_nontemporal_store((vf_aligned)v, (vf_aligned*)p);
  else
    *(vf*)p = v;
}

// Elements [lo, hi) of the job; lo and hi are multiples of 64 (256 bytes),
// so streaming stores are aligned whenever the arrays are.
static void memory_part(struct Job* j, size_t lo, size_t hi) {
  float* a = j->a;
  const float* b = j->b;
  const float* c = j->c;
  if (j->kind == TRIAD) {
    const vf s = j->s;
    for (size_t i = lo; i < hi; i += VW) store(a + i, *(const vf*)(b + i) + s * *(const vf*)(c + i), j->streaming);
  } else if (j->kind == COPY) {
    for (size_t i = lo; i < hi; i += VW) store(a + i, *(const vf*)(b + i), j->streaming);
  } else {
    vf s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = lo; i < hi; i += 4 * VW) {
      s0 += *(const vf*)(b + i);
      s1 += *(const vf*)(b + i + VW);
      s2 += *(const vf*)(b + i + 2 * VW);
      s3 += *(const vf*)(b + i + 3 * VW);
    }
    const vf s = s0 + s1 + s2 + s3;
    double t = 0;
    for (int k = 0; k < VW; ++k) t += s[k];
    j->sink += t;
  }
}

// Twelve independent chains of vector FMAs: enough to fill the FMA units'
// pipelines on current x86 cores (latency 4, two units).
static void fma_part(struct Job* j) {
  vf x0 = 1.0f, x1 = 1.1f, x2 = 1.2f, x3 = 1.3f, x4 = 1.4f, x5 = 1.5f;
  vf x6 = 1.6f, x7 = 1.7f, x8 = 1.8f, x9 = 1.9f, xa = 2.0f, xb = 2.1f;
  const vf m = 0.999999f, k = 1e-7f;
  for (long i = 0; i < j->iters; ++i) {
    x0 = __builtin_elementwise_fma(x0, m, k); x1 = __builtin_elementwise_fma(x1, m, k);
    x2 = __builtin_elementwise_fma(x2, m, k); x3 = __builtin_elementwise_fma(x3, m, k);
    x4 = __builtin_elementwise_fma(x4, m, k); x5 = __builtin_elementwise_fma(x5, m, k);
    x6 = __builtin_elementwise_fma(x6, m, k); x7 = __builtin_elementwise_fma(x7, m, k);
    x8 = __builtin_elementwise_fma(x8, m, k); x9 = __builtin_elementwise_fma(x9, m, k);
    xa = __builtin_elementwise_fma(xa, m, k); xb = __builtin_elementwise_fma(xb, m, k);
  }
  const vf s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7 + x8 + x9 + xa + xb;
  j->sink += s[0];
}

struct Arg {
  struct Job* job;
  int index;
};

// Thread `index`'s share of the job.
static void part(struct Job* j, int index) {
  if (j->kind == FMA) {
    fma_part(j);
  } else {
    const size_t chunk = (j->n / j->threads) & ~(size_t)63;
    const size_t lo = chunk * index;
    const size_t hi = index == j->threads - 1 ? (j->n & ~(size_t)63) : lo + chunk;
    memory_part(j, lo, hi);
  }
  if (j->streaming) __builtin_ia32_sfence();
}

static void* worker(void* p) {
  struct Arg* arg = (struct Arg*)p;
  struct Job* j = arg->job;
  atomic_fetch_add(&j->ready, 1);
  while (!atomic_load(&j->go)) {
  }
  part(j, arg->index);
  atomic_fetch_add(&j->done, 1);
  return 0;
}

// Returns the seconds of one run (negative: no thread could be started for
// part of the work).
double mk_limit_run(int kind, int streaming, float* a, const float* b, const float* c, float s, size_t n,
                    long iters, int threads) {
  enum { MAX_THREADS = 256 };
  if (threads < 1 || threads > MAX_THREADS) return -1.0;
  struct Job job = {kind, streaming, a, b, c, s, n, iters, threads, 0, 0, 0, 0.0};
  pthread_t tid[MAX_THREADS];
  struct Arg args[MAX_THREADS];
  int started = 1;
  for (int i = 1; i < threads; ++i) {
    args[i].job = &job;
    args[i].index = i;
    if (pthread_create(&tid[started], 0, worker, &args[i]) != 0) break;
    ++started;
  }
  // Thread 0 is the caller: time from the moment every thread is ready to
  // the moment the last one is done.
  while (atomic_load(&job.ready) < started - 1) {
  }
  const double t0 = now();
  atomic_store(&job.go, 1);
  part(&job, 0);
  while (atomic_load(&job.done) < started - 1) {
  }
  const double t1 = now();
  for (int i = 1; i < started; ++i) pthread_join(tid[i], 0);
  volatile double sink = job.sink;
  (void)sink;
  return started == threads ? t1 - t0 : -1.0;
}

// Floats per vector in the FMA loop (its FLOP count).
int mk_limit_vector_width(void) { return VW; }
