"""metal_kernel.check(): the findings' fields, the report's shape, the ways
to turn it on (the block, $METAL_KERNEL_CHECK, `metal-kernel check`, pytest),
and what it promises beyond the corpus."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel.check import Finding, Report

SHIFT = """#include <metal_stdlib>
using namespace metal;
kernel void shift(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                  uint i [[thread_position_in_grid]]) {
  y[i + 1] = x[i];
}
kernel void copy(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  y[i] = x[i];
}
kernel void reduce(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                   uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]],
                   uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint k = 32; k > 0; k >>= 1) {
    if (lid < k) s[lid] += s[lid + k];
  }
  if (lid == 0) out[tg] = s[0];
}
struct S5 { float a, b, c, d, e; };
kernel void copy_s5(device const S5* x [[buffer(0)]], device S5* y [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  y[i] = x[i];
}
kernel void bump(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) {
  const float v = x[i] + 1.0f;
  threadgroup_barrier(mem_flags::mem_none);  // not provable whole: schedule runs
  y[i] = v;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SHIFT, source_name="kernel.metal")


def test_an_out_of_bounds_store_is_a_finding_with_every_field(lib):
    y = torch.full((100,), float("nan"))
    with metal_kernel.check() as report:
        lib.shift(torch.ones(100), y, threads=100, group_size=32)
    assert not report.ok and len(report.findings) == 1
    f = report.findings[0]
    assert isinstance(f, Finding)
    assert (f.kind, f.kernel, f.line, f.function) == ("oob", "shift", "kernel.metal:5", "shift")
    assert f.thread == (99, 0, 0) and f.threadgroup == (3, 0, 0)
    assert (f.simdgroup, f.lane) == (0, 3)
    assert f.address_space == "device" and f.buffer == (1, "y")
    assert (f.offset, f.size, f.access) == (400, 4, "write")
    # the store was not performed: the rest is right, nothing past the end changed
    assert torch.equal(y[1:], torch.ones(99))


def test_the_text_report_has_compute_sanitizers_shape(lib):
    with metal_kernel.check() as report:
        lib.shift(torch.ones(100), torch.zeros(100), threads=100, group_size=32)
    lines = str(report).splitlines()
    assert all(ln.startswith("=========") for ln in lines)
    assert "========= Invalid device write of size 4 bytes" in lines
    assert "=========     at shift() in kernel.metal:5" in lines
    assert "=========     by thread (99,0,0) in threadgroup (3,0,0)" in lines
    assert "=========     Address is 0 bytes past the end of buffer 1 'y' (400 bytes)" in lines
    assert lines[-1] == "========= ERROR SUMMARY: 1 error"


def test_an_access_that_runs_over_the_end_says_where_it_starts_and_how_far_it_runs(lib):
    # 22 floats hold 4 whole 20-byte structs and 8 bytes of a fifth.
    with metal_kernel.check() as report:
        lib.copy_s5(torch.ones(22), torch.zeros(25), threads=5, group_size=5)
    (f,) = report.findings
    assert (f.offset, f.size) == (80, 20)
    assert "Address is 8 bytes before the end of buffer 0 'x' (88 bytes), and the access runs 12 bytes past it" \
        in f.details


def test_a_race_names_both_accesses(lib):
    with metal_kernel.check(schedules=1) as report:
        lib.reduce(torch.ones(64), torch.zeros(1), threads=64, group_size=64)
    races = [f for f in report.findings if f.kind == "race"]
    assert races, str(report)
    r = races[0]
    assert r.address_space == "threadgroup" and r.line == "kernel.metal:18"
    assert r.other is not None and r.other.line == "kernel.metal:18"
    assert {r.access, r.other.access} <= {"read", "write"} and "write" in {r.access, r.other.access}


def test_memory_that_happens_to_be_mapped_is_not_in_bounds(lib):
    # Two arrays back to back in one allocation: y's end is x2's start.
    block = (ctypes.c_float * 200)()
    y = np.frombuffer(block, dtype=np.float32, count=100)
    neighbour = np.frombuffer(block, dtype=np.float32, count=100, offset=400)
    neighbour[:] = 7
    with metal_kernel.check() as report:
        lib.shift(np.ones(100, np.float32), y, threads=100, group_size=32)
    assert [f.kind for f in report.findings] == ["oob"]
    assert report.findings[0].buffer == (1, "y")
    assert (neighbour == 7).all()  # the neighbour was not written


def test_a_view_may_reach_the_rest_of_its_storage(lib):
    # torch.mps binds a view at its offset into the whole MTLBuffer.
    base = torch.arange(10, dtype=torch.float32)
    y = torch.full((6,), float("nan"))
    with metal_kernel.check() as report:
        lib.copy(base[2:], y, threads=6, group_size=6)
    assert report.ok, str(report)
    assert torch.equal(y, base[2:8])


def test_schedule_runs_read_what_the_first_run_read_when_buffers_alias(lib):
    # x is only read and proven in bounds, so the schedule runs could read
    # it in place, but it is y's memory too: they must read it as it was.
    t = torch.arange(300, dtype=torch.float32)
    with metal_kernel.check() as report:
        lib.bump(t, t, threads=300, group_size=64)
    assert report.ok, str(report)
    assert torch.equal(t, torch.arange(300, dtype=torch.float32) + 1)
    x, y = torch.rand(300), torch.full((300,), float("nan"))
    with metal_kernel.check() as report:
        lib.bump(x, y, threads=300, group_size=64)
    assert report.ok and torch.equal(y, x + 1), str(report)


def test_a_dispatch_proven_safe_runs_the_ordinary_build(lib):
    x, y = torch.rand(5000), torch.full((5000,), float("nan"))
    with metal_kernel.check() as report:
        lib.copy(x, y, threads=5000, group_size=256)
    assert report.ok and report.proven == 1
    assert torch.equal(x, y)


def test_options_are_checked():
    with pytest.raises(ValueError, match="unknown check tool"):
        with metal_kernel.check(tools=("memcheck", "leakcheck")):
            pass
    with pytest.raises(ValueError, match="schedules"):
        with metal_kernel.check(schedules=0):
            pass


def test_tools_can_be_chosen(lib):
    with metal_kernel.check(tools=("racecheck",), schedules=1) as report:
        lib.shift(torch.ones(100), torch.zeros(100), threads=100, group_size=32)
        lib.reduce(torch.ones(64), torch.zeros(1), threads=64, group_size=64)
    assert {f.kind for f in report.findings} == {"race"}


def test_max_findings_caps_the_list_and_says_so(lib):
    with metal_kernel.check(max_findings=1, schedules=1) as report:
        lib.shift(torch.ones(100), torch.zeros(100), threads=100, group_size=32)
        lib.reduce(torch.ones(64), torch.zeros(1), threads=64, group_size=64)
    assert len(report.findings) == 1
    assert any("more error(s) not listed" in n for n in report.notes)


def test_a_kernel_the_checker_cannot_follow_runs_unchecked_with_a_note():
    n = 66  # more buffers than the checker follows
    params = ", ".join(f"device const float* in{i} [[buffer({i})]]" for i in range(n - 1))
    src = (f"kernel void wide({params}, device float* out [[buffer({n - 1})]], uint i [[thread_position_in_grid]])"
           f" {{ out[i] = in0[i] + in{n - 2}[i]; }}")
    lib = metal_kernel.compile_shader(src)
    ins = [torch.full((8,), float(i)) for i in range(n - 1)]
    out = torch.full((8,), float("nan"))
    with metal_kernel.check() as report:
        lib.wide(*ins, out, threads=8)
    assert report.ok and any("ran unchecked" in n for n in report.notes)
    assert torch.equal(out, torch.full((8,), float(n - 2)))


def test_report_to_json(lib):
    with metal_kernel.check() as report:
        lib.shift(torch.ones(100), torch.zeros(100), threads=100, group_size=32)
    data = json.loads(report.dumps())
    assert data["ok"] is False and data["errors"] == 1 and data["findings"][0]["kind"] == "oob"
    assert isinstance(report, Report)


SCRIPT = """
import torch, metal_kernel
lib = metal_kernel.compile_shader('''{src}''', source_name="kernel.metal")
lib.{kernel}(torch.ones(100), torch.zeros(100), threads=100, group_size=32)
print("program ran")
"""


def _script(tmp_path, kernel: str) -> str:
    path = tmp_path / f"run_{kernel}.py"
    path.write_text(SCRIPT.format(src=SHIFT, kernel=kernel))
    return str(path)


def _env():
    env = dict(os.environ)
    env.pop("METAL_KERNEL_CHECK", None)
    return env


def test_environment_variable_checks_an_unmodified_program(tmp_path):
    p = subprocess.run([sys.executable, _script(tmp_path, "shift")], capture_output=True, text=True,
                       env={**_env(), "METAL_KERNEL_CHECK": "1"})
    assert p.returncode == 0 and "program ran" in p.stdout
    assert "========= Invalid device write of size 4 bytes" in p.stderr
    assert "========= ERROR SUMMARY: 1 error" in p.stderr


def test_the_cli_wraps_a_program_like_compute_sanitizer(tmp_path):
    cmd = [sys.executable, "-m", "metal_kernel.cli", "check"]
    bad, good = _script(tmp_path, "shift"), _script(tmp_path, "copy")
    p = subprocess.run(cmd + ["--", sys.executable, bad], capture_output=True, text=True, env=_env())
    assert p.returncode == 0 and "ERROR SUMMARY: 1 error" in p.stderr
    p = subprocess.run(cmd + ["--error-exitcode", "3", "--", sys.executable, bad], capture_output=True, text=True,
                       env=_env())
    assert p.returncode == 3
    p = subprocess.run(cmd + ["--error-exitcode", "3", "--", sys.executable, good], capture_output=True, text=True,
                       env=_env())
    assert p.returncode == 0 and "ERROR SUMMARY: 0 errors" in p.stderr
    p = subprocess.run(cmd + ["--json", "--error-exitcode", "5", "--", sys.executable, bad], capture_output=True,
                       text=True, env=_env())
    data = json.loads(p.stdout[p.stdout.index("{"):])
    assert p.returncode == 5 and data["errors"] == 1 and data["findings"][0]["line"] == "kernel.metal:5"
    assert "=========" not in p.stderr
    p = subprocess.run(cmd + ["--", "no-such-program-xyz"], capture_output=True, text=True, env=_env())
    assert p.returncode == 2 and "cannot run" in p.stderr


def test_pytest_metal_check_fails_a_test_whose_kernels_are_wrong(tmp_path):
    peek = ("kernel void peek(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],"
            " uint i [[thread_position_in_grid]]) { y[i] = x[i + 1]; }")
    (tmp_path / "test_k.py").write_text(
        "import torch, metal_kernel\n"
        f"lib = metal_kernel.compile_shader({SHIFT!r})\n"
        f"peek = metal_kernel.compile_shader({peek!r})\n"
        "def test_bad():\n"
        "    lib.shift(torch.ones(100), torch.zeros(100), threads=100, group_size=32)\n"
        "def test_read():\n"
        "    peek.peek(torch.ones(100), torch.zeros(100), threads=100, group_size=32)\n"
        "def test_good():\n"
        "    lib.copy(torch.ones(100), torch.zeros(100), threads=100, group_size=32)\n"
        "def test_fixture(metal_check):\n"
        "    lib.copy(torch.ones(100), torch.zeros(100), threads=100, group_size=32)\n"
        "    assert metal_check.ok\n")
    # the plugin comes from the pytest11 entry point the install registers
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_k.py")]
    plain = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd=tmp_path)
    # unchecked, the store past the end is stopped (runtime/store_guard.py); the read passes
    assert "1 failed, 3 passed" in plain.stdout and "test_bad - metal_kernel.runtime.errors.KernelError" in \
        plain.stdout, plain.stdout
    checked = subprocess.run(args + ["--metal-check"], capture_output=True, text=True, env=_env(), cwd=tmp_path)
    assert "2 failed, 2 passed" in checked.stdout, checked.stdout
    assert "Invalid device write" in checked.stdout and "Invalid device read" in checked.stdout
