"""The fixed cost of one dispatch: what a kernel call costs beyond its work.

    python benchmarks/dispatch_cost.py [--json OUT] [--repeat N]

A saxpy of 256, 4096 and 1M floats, called through `compile_shader`'s
calling convention, timed three ways (medians):

- back to back: call after call;
- after a sleep: each call after 3 ms of sleep, the pool's workers (and, on
  a VM, the idle cores) asleep; a 256-float saxpy is one threadgroup, so
  this is all fixed cost;
- the native part alone: the runtime library's `mkrt_dispatch` (running
  the groups on the calling thread, or waking the pool's workers, which run
  them, and waiting for them), the rest of a call being Python (binding the
  arguments, the geometry, the store proof remembered per dispatch shape).

Each row also records how its timed calls ran (`dispatch_counts()`: on the
calling thread alone, handed over to the pool part way, or on the pool).

Prints a table; `--json` writes every run's time, the medians and spreads
(benchmarks/perf/timing.py's summary, in seconds) and the machine.
Never part of the tests: it measures time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "perf"))

import standalone  # benchmarks/perf
from timing import summary

import metal_kernel
from metal_kernel.runtime.native import dispatch_counts

SAXPY = """
#include <metal_stdlib>
using namespace metal;
kernel void saxpy(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                  device const float* y [[buffer(2)]], constant float& a [[buffer(3)]],
                  uint i [[thread_position_in_grid]]) {
  out[i] = a * x[i] + y[i];
}
"""
SIZES = (256, 4096, 1 << 20)
SLEEP_S = 0.003


def measure(repeat: int) -> list[dict]:
    lib = metal_kernel.compile_shader(SAXPY)
    k = lib.saxpy
    # The store proof's facts now, as bench_runtime.py does: without them the
    # first dispatches write fenced copies of `out` (runtime/store_guard.py),
    # which is not the fixed cost this measures.
    assert k.prove_stores(), "saxpy's stores have no proof facts"
    native: list[float] = []
    cls = type(k)
    plain_run = cls._run

    def timed_run(self, *a, **kw):  # the native dispatch only
        t0 = time.perf_counter()
        try:
            return plain_run(self, *a, **kw)
        finally:
            native.append(time.perf_counter() - t0)

    cls._run = timed_run
    rows = []
    try:
        for n in SIZES:
            x, y = np.ones(n, np.float32), np.ones(n, np.float32)
            out = np.full(n, np.nan, np.float32)

            def call(out=out, x=x, y=y, n=n):
                t0 = time.perf_counter()
                k(out, x, y, 1.5, threads=n, group_size=256)
                return time.perf_counter() - t0

            for _ in range(5):
                call()
            assert np.all(out == 2.5), "saxpy wrote wrong values"
            native.clear()
            before = dispatch_counts()
            b2b = [call() for _ in range(repeat)]
            b2b_native = list(native)
            native.clear()
            slept = []
            for _ in range(max(repeat // 4, 10)):
                time.sleep(SLEEP_S)
                slept.append(call())
            after = dispatch_counts()
            rows.append({"elements": n, "back_to_back": summary(b2b), "back_to_back_native": summary(b2b_native),
                         "after_sleep": summary(slept), "after_sleep_native": summary(list(native)),
                         "routes": {route: after[route] - before[route] for route in ("caller", "handed_over", "pool")}})
    finally:
        cls._run = plain_run
    return rows


def table(rows: list[dict]) -> str:
    def us(side: dict) -> str:
        return f"{side['median_s'] * 1e6:.0f}"

    def routes(r: dict) -> str:
        return ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in r.get("routes", {}).items() if v)

    out = ["| saxpy | back to back, µs (native part) | after 3 ms asleep, µs (native part) | calls ran on |",
           "|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['elements']} floats | {us(r['back_to_back'])} ({us(r['back_to_back_native'])}) | "
                   f"{us(r['after_sleep'])} ({us(r['after_sleep_native'])}) | {routes(r)} |")
    return "\n".join(out)


def main(argv=None) -> int:
    return standalone.main(__doc__, measure, table, 400, "calls per size back to back", {"sleep_s": SLEEP_S}, argv)


if __name__ == "__main__":
    sys.exit(main())
