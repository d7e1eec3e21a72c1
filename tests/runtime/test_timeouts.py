"""A kernel that never finishes is stopped: by `timeout=` (KernelTimeout)
or Ctrl-C (KeyboardInterrupt), and the process keeps working."""

import os
import subprocess
import sys
import textwrap
import time

import pytest
import torch

import metal_kernel
from metal_kernel import KernelError, KernelTimeout


SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
// `k >= 0` is always true for a uint: the classic endless loop.
kernel void spin(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  for (uint k = n; k >= 0; --k) out[(i + k) % 64] += 1.0f;
}
kernel void spin_one_group(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]],
                           uint tg [[threadgroup_position_in_grid]]) {
  if (tg == 3) { for (uint k = 4; k >= 0; --k) out[k % 64] += 1.0f; }
  out[i % 64] = 2.0f;
}
kernel void spin_with_barriers(device float* out [[buffer(0)]],
                               uint l [[thread_position_in_threadgroup]]) {
  threadgroup float s[64];
  for (uint k = 4; k >= 0; --k) {
    s[l] = float(k);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[l] += s[(l + 1) % 64];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
}
kernel void iota(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  out[i] = float(i);
}
kernel void wild(device float* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i == 9) { device float* p = (device float*)16; *p = 1; }
  out[i] = 1.0f;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def _still_works(lib):
    out = torch.full((300,), float("nan"))
    lib.iota(out, threads=300)
    assert torch.equal(out, torch.arange(300, dtype=torch.float32))


@pytest.mark.parametrize("name,args,threads", [
    ("spin", (5,), 4096),                 # every group loops forever
    ("spin_one_group", (), 64 * 8),       # one group of eight does
    ("spin_with_barriers", (), 64),       # loops across barriers
])
@pytest.mark.no_metal_check  # endless or faulting kernels on purpose (the runtime's own stopping is under test)
def test_endless_kernels_are_stopped(both, name, args, threads):
    out = torch.zeros(64)
    start = time.monotonic()
    with pytest.raises(KernelTimeout) as e:
        getattr(both, name)(out, *args, threads=threads, group_size=64, timeout=0.3)
    elapsed = time.monotonic() - start
    assert 0.3 <= elapsed < 5
    err = e.value
    assert isinstance(err, KernelError) and isinstance(err, TimeoutError)
    assert err.kernel == name
    assert f"kernel '{name}': did not finish within 0.3 s" in str(err)
    assert err.threadgroup is not None or err.thread is not None
    if name == "spin_one_group":
        assert err.threadgroup == [3, 0, 0]
    _still_works(both)


@pytest.mark.no_metal_check  # endless or faulting kernels on purpose (the runtime's own stopping is under test)
def test_fibers_name_the_running_thread(fiber_lib):
    with pytest.raises(KernelTimeout) as e:
        fiber_lib.spin_with_barriers(torch.zeros(64), threads=64, group_size=64, timeout=0.2)
    assert e.value.thread is not None and 0 <= e.value.thread[0] < 64
    assert "thread [" in str(e.value)


@pytest.mark.no_metal_check  # endless or faulting kernels on purpose (the runtime's own stopping is under test)
def test_timeout_from_the_environment(lib, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_TIMEOUT", "0.2")
    with pytest.raises(KernelTimeout, match="within 0.2 s"):
        lib.spin(torch.zeros(64), 3, threads=64)
    _still_works(lib)  # a kernel that finishes is not affected


@pytest.mark.parametrize("timeout", [60, float("inf"), 1e300])
def test_a_kernel_that_finishes_is_untouched_by_its_timeout(lib, timeout):
    out = torch.full((1 << 16,), float("nan"))
    lib.iota(out, threads=out.numel(), timeout=timeout)
    assert torch.equal(out, torch.arange(1 << 16, dtype=torch.float32))


@pytest.mark.no_metal_check  # endless or faulting kernels on purpose (the runtime's own stopping is under test)
def test_faults_are_still_reported_with_a_timeout(lib):
    with pytest.raises(KernelError) as e:
        lib.wild(torch.zeros(64), threads=64, timeout=10)
    assert not isinstance(e.value, KernelTimeout)
    assert e.value.thread == [9, 0, 0]


@pytest.mark.parametrize("bad", [0, -1, "soon", float("nan")])
def test_bad_timeouts(lib, bad):
    with pytest.raises(ValueError, match="timeout"):
        lib.iota(torch.zeros(4), threads=4, timeout=bad)


def test_ctrl_c_stops_a_kernel_and_the_process_goes_on(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, threading, torch, metal_kernel
        lib = metal_kernel.compile_shader({SOURCE!r})
        out = torch.zeros(64)
        threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            lib.spin(out, 5, threads=4096, group_size=64)
            print("returned")
        except KeyboardInterrupt:
            print("interrupted")
        lib.iota(out, threads=64)
        print("after", out[:3].tolist())
    """)
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["interrupted", "after [0.0, 1.0, 2.0]"]
