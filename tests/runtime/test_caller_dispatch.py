"""Where a dispatch runs (runtime/src/mkrt_pool.h, Pool): one threadgroup, or a
kernel whose last dispatch predicts little work, on the calling thread with
no hand-over; a wrong prediction hands the rest to the pool; everything else
on the pool. Whichever thread runs a group, it computes the same, and the
caller's own thread state neither leaks into a kernel nor is changed by one."""

import ast
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel.runtime.native import dispatch_counts, runtime

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void halve(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  y[i] = x[i] * 0.5f;
}
// An LCG stepped `reps` times: work that grows with reps, a result numpy
// reproduces exactly.
kernel void lcg(device uint* y [[buffer(0)]], constant uint& reps [[buffer(1)]],
                uint i [[thread_position_in_grid]]) {
  uint v = i;
  for (uint r = 0; r < reps; ++r) v = v * 1664525u + 1013904223u;
  y[i] = v;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def lcg_reference(n: int, reps: int) -> np.ndarray:
    v = np.arange(n, dtype=np.uint32)
    for _ in range(reps):
        v = v * np.uint32(1664525) + np.uint32(1013904223)
    return v


def routed(call) -> dict:
    before = dispatch_counts()
    call()
    after = dispatch_counts()
    return {k: after[k] - before[k] for k in ("caller", "handed_over", "pool")}


@pytest.mark.no_metal_check  # counts this process's dispatches (check() adds its own)
def test_one_threadgroup_runs_on_the_caller(lib):
    x = torch.linspace(-4, 4, 256)
    y = torch.full((256,), float("nan"))
    assert routed(lambda: lib.halve(x, y, threads=256, group_size=256)) == {"caller": 1, "handed_over": 0,
                                                                            "pool": 0}
    assert torch.equal(y, x * 0.5)


@pytest.mark.no_metal_check  # counts this process's dispatches (check() adds its own)
def test_every_route_computes_the_same(lib):
    """A kernel unknown to the runtime goes to the pool; once its last
    dispatch predicts little work it stays on the caller; a dispatch far
    bigger than predicted is handed over part way. The prediction comes from
    measured time, so a preempted call may route differently: a few tries."""
    if runtime().mkrt_init(0) < 2:
        pytest.skip("one worker: every dispatch runs on the caller")
    n, big = 8192, 4000
    want_small, want_big = lcg_reference(n, 1), lcg_reference(n, big)
    seen = {"caller": 0, "handed_over": 0, "pool": 0}
    for _ in range(6):
        for reps, want in ((1, want_small), (1, want_small), (big, want_big)):
            y = np.full(n, 0xDEADBEEF, np.uint32)
            for k, v in routed(lambda y=y, reps=reps: lib.lcg(y, reps, threads=n, group_size=64)).items():
                seen[k] += v
            np.testing.assert_array_equal(y, want)
        if all(seen.values()):
            break
    assert all(seen.values()), seen


@pytest.mark.no_metal_check  # counts this process's dispatches (check() adds its own)
def test_the_callers_floating_point_environment_is_its_own(lib):
    """torch.set_flush_denormal sets flush-to-zero on the calling thread: a
    group run there still keeps subnormals, as on a pool thread, and the
    caller's setting is intact after."""
    x = torch.full((4096,), 2e-38)  # normal; half of it is subnormal
    want = (x * 0.5).view(torch.int32)
    assert (want != 0).all()
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        for threads in (64, 4096):  # one group (the caller), then the pool or the caller
            y = torch.full((threads,), float("nan"))
            lib.halve(x[:threads], y, threads=threads, group_size=64)
            assert torch.equal(y.view(torch.int32), want[:threads]), y[:4]
        assert (x[:1] * 0.5).item() == 0.0  # still flushing here
    finally:
        torch.set_flush_denormal(False)


SUBPROCESS = r"""
import threading, torch, metal_kernel
from metal_kernel import KernelError, KernelTimeout
lib = metal_kernel.compile_shader(SOURCE)
results = []
def run():
    try:
        lib.deep(torch.zeros(1), threads=1)
        results.append("returned")
    except KernelError as e:
        results.append(type(e).__name__ + ": " + ("stack" if "deep" in str(e) else str(e)))
    try:
        lib.spin(torch.zeros(64), threads=64, group_size=64, timeout=0.2)
        results.append("returned")
    except KernelTimeout as e:
        results.append("timeout")
    out = torch.full((64,), float("nan"))
    lib.fine(out, threads=64)
    results.append(out[:3].tolist())
t = threading.Thread(target=run)  # no alternate signal stack on this thread
t.start()
t.join()
print(results)
"""

FAULTING = r"""
#include <metal_stdlib>
using namespace metal;
float recurse(uint depth) {
  volatile float pad[256];
  pad[depth % 256] = depth;
  if (depth > 100000000u) return pad[0];
  return recurse(depth + 1) + pad[depth % 256];
}
kernel void deep(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = recurse(i); }
kernel void spin(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  volatile uint k = 0;
  while (x[0] == 0.0f) { k = k + 1; }
  x[i] = k;
}
kernel void fine(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = i; }
"""


@pytest.mark.no_metal_check  # faults and loops on purpose (the runtime's own handling is under test)
def test_a_fault_or_an_endless_group_on_a_python_thread_is_reported():
    """The caller's thread runs the single group here: a stack overflow
    needs the alternate signal stack the runtime lends it, an endless loop
    the watchdog, since the caller is busy in the kernel."""
    script = f"SOURCE = {FAULTING!r}\n" + textwrap.dedent(SUBPROCESS)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "['KernelError: stack', 'timeout', [0.0, 1.0, 2.0]]", proc.stdout


PIN_SCRIPT = r"""
import os, numpy as np, metal_kernel
from metal_kernel.runtime.native import dispatch_counts, runtime
lib = metal_kernel.compile_shader(SOURCE)
y = np.zeros(1 << 16, np.uint32)
for _ in range(4):
    lib.lcg(y, 1, threads=y.size, group_size=64)
me = os.getpid()
masks = sorted(sorted(os.sched_getaffinity(int(t))) for t in os.listdir("/proc/self/task") if int(t) != me)
print(repr((runtime().mkrt_init(0), dispatch_counts()["pinned"], masks)))
"""


@pytest.mark.parametrize("mode", ["0", "1"])
def test_pinning_the_pool_threads_follows_the_environment(mode):
    """METAL_KERNEL_PIN_THREADS=1 pins pool thread i to the i-th CPU the
    process may use (the default does so once it has seen two of them start
    a dispatch on one CPU, which a test cannot provoke); 0 never pins."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        pytest.skip("one CPU: there is no pool to pin")
    env = {**os.environ, "METAL_KERNEL_PIN_THREADS": mode, "METAL_KERNEL_NUM_THREADS": "2"}
    script = f"SOURCE = {SOURCE!r}\n" + PIN_SCRIPT
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    workers, pinned, masks = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert workers == 2
    singles = [m for m in masks if len(m) == 1]
    if mode == "1":
        assert pinned == 1 and sorted(singles) == [[allowed[0]], [allowed[1]]], masks
    else:
        assert pinned == 0 and not singles, masks
