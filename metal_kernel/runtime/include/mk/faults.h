// Included by every prelude (Metal's mk/prelude.h, CUDA's mkcuda/prelude.h).
#pragma once
#include "runtime.h"

// Integer division by zero traps on x86 but not on a GPU. Kernels are built
// with -fsanitize=integer-divide-by-zero and the minimal runtime, whose
// handlers land here: the dispatch stops with a clear error instead.
extern "C" __attribute__((visibility("hidden"), noreturn, used)) void
__ubsan_handle_divrem_overflow_minimal_abort() {
  __mk_rt->fail("integer division by zero (or INT_MIN / -1)");
  __builtin_unreachable();
}
extern "C" __attribute__((visibility("hidden"), noreturn, used)) void
__ubsan_handle_divrem_overflow_minimal() {
  __mk_rt->fail("integer division by zero (or INT_MIN / -1)");
  __builtin_unreachable();
}
