"""Loop summaries (check/summarise.py, mk/check_loop.h): a loop's checks done
once as ranges must find exactly what the access-by-access checks find, the
same finding at the same thread, line, offset and count, and never
summarise an access that does not run on every iteration."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import metal_kernel
from metal_kernel.check.session import checked_library

ROOT = Path(__file__).resolve().parents[2]

SRC = """#include <metal_stdlib>
using namespace metal;
kernel void rowsum(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                   constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]]) {
  float s = 0.0f;
  for (uint i = 0; i < n; ++i) s += a[gid * n + i];
  out[gid] = s;
}
kernel void strided(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                    constant int& n [[buffer(2)]], uint gid [[thread_position_in_grid]]) {
  float s = 0.0f;
  for (int i = -4; i < n; i += 3) s += a[int(gid) * 16 + i + 4];
  out[gid] = s;
}
kernel void tg_rows(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                    constant uint& n [[buffer(2)]], uint lid [[thread_position_in_threadgroup]],
                    uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float acc = 0.0f;
  for (uint k = 0; k < n; ++k) acc += s[lid / 16 * 16 + k];
  out[gid] = acc;
}
kernel void read_then_write(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                            uint lid [[thread_position_in_threadgroup]], uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float acc = 0.0f;
  for (uint k = 0; k < 8; ++k) acc += s[lid / 8 * 8 + k];
  if (lid == 63) s[0] = acc;
  out[gid] = acc;
}
kernel void write_then_read(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                            uint lid [[thread_position_in_threadgroup]], uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) s[63] = 2.0f;  // not the value s[63] holds: a store of the same value is no access
  float acc = 0.0f;
  for (uint k = 0; k < 8; ++k) acc += s[lid / 8 * 8 + k];
  out[gid] = acc;
}
kernel void half_written(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                         uint lid [[thread_position_in_threadgroup]], uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  if (lid < 60) s[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float acc = 0.0f;
  for (uint k = 0; k < 8; ++k) acc += s[lid / 8 * 8 + k];
  out[gid] = acc;
}
kernel void picked(device const uint* mask [[buffer(0)]], device float* out [[buffer(1)]],
                   uint lid [[thread_position_in_threadgroup]], uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = float(lid);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float acc = 0.0f;
  for (uint k = 0; k < 64; ++k)
    if (mask[k] == lid) acc += s[k];
  s[lid] = acc;
  out[gid] = acc;
}
kernel void sum_into(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                     uint gid [[thread_position_in_grid]]) {
  for (uint i = 0; i < 8; ++i) out[i] += a[gid];
}
kernel void lanes(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                  uint lid [[thread_position_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                  uint gid [[thread_position_in_grid]]) {
  threadgroup float s[64];
  s[lid] = x[gid];
  simdgroup_barrier(mem_flags::mem_threadgroup);
  float acc = 0.0f;
  for (uint k = 0; k < 32; ++k) acc += s[lid - lane + k];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  s[lid] = acc;
  out[gid] = acc;
}
"""


def _lib(summaries: bool, monkeypatch):
    # The setting is part of the checked build's cache key; a distinct source
    # keeps the two libraries (and their checked builds) apart in the process.
    monkeypatch.setenv("METAL_KERNEL_CHECK_SUMMARIES", "1" if summaries else "0")
    src = SRC + f"// summaries {'on' if summaries else 'off'}\n"
    lib = metal_kernel.compile_shader(src, source_name="loops.metal")
    checked_library(lib)  # built now, with the setting
    return lib


@pytest.fixture(scope="module")
def libs():
    mp = pytest.MonkeyPatch()
    try:
        return {True: _lib(True, mp), False: _lib(False, mp)}
    finally:
        mp.undo()


def summaries(lib, name: str) -> int:
    clib = checked_library(lib)
    k = getattr(clib, name)
    return clib._compiled.check_of(k._entry)["kernels"][str(k._entry.symbol)].get("summaries", 0)


def _key(f):
    other = (f.other.thread, f.other.line, f.other.access) if f.other else None
    return (f.kind, f.kernel, f.thread, f.threadgroup, f.line, f.address_space, f.buffer, f.offset, f.size,
            f.access, f.count, other)


def _keys(findings) -> list:
    """What two runs of a dispatch must agree on. Groups run at once on
    several workers: of a finding several threads make (count > 1), which
    thread reports first (its thread, offset, other thread) and how many
    device-memory pairs of concurrent groups meet depend on the timing; a
    race between two groups is reported by whichever of them ran second, as
    a read-write or a write-write pair (so races compare by their lines);
    findings of different groups arrive in either order. Those parts are
    left out; any other finding made once is compared whole."""
    out, races = [], set()
    for f in findings:
        if f.kind == "race":  # which pair of accesses meets first (read-write or write-write) is timing too
            races.add((f.kernel, f.address_space, f.buffer, tuple(sorted({f.line, f.other.line if f.other else None},
                                                                            key=repr))))
        elif f.count == 1:
            out.append(_key(f))
        else:
            out.append((f.kind, f.kernel, f.line, f.address_space, f.buffer, f.size, f.access))
    return sorted(out, key=repr) + sorted(races, key=repr)


def both(libs, run, schedules: int = 4):
    """The findings with summaries and without: they must be the same."""
    out = []
    for on in (True, False):
        with metal_kernel.check(schedules=schedules) as report:
            run(libs[on])
        out.append(report)
    assert _keys(out[0].findings) == _keys(out[1].findings), (str(out[0]), str(out[1]))
    return out[0]


def test_a_late_out_of_bounds_read_names_the_thread_and_offset(libs):
    assert summaries(libs[True], "rowsum") == 1 and summaries(libs[False], "rowsum") == 0
    a = np.ones(64 * 8 - 1, np.float32)  # the last thread's last iteration reads one past the end
    out = np.zeros(64, np.float32)
    report = both(libs, lambda lib: lib.rowsum(a, out, 8, threads=64, group_size=32, arg_casts={2: "int32"}))
    assert len(report.findings) == 1
    f = report.findings[0]
    assert (f.kind, f.thread, f.threadgroup, f.line) == ("oob", (63, 0, 0), (1, 0, 0), "loops.metal:6")
    assert (f.offset, f.size, f.access, f.count) == ((64 * 8 - 1) * 4, 4, "read", 1)


def test_clean_loops_are_summarised_and_compute_the_same(libs):
    a = np.arange(64 * 8, dtype=np.float32)
    out = np.zeros(64, np.float32)
    with metal_kernel.check() as report:
        libs[True].rowsum(a, out, 8, threads=64, group_size=32, arg_casts={2: "int32"})
    assert report.ok, str(report)
    np.testing.assert_allclose(out, a.reshape(64, 8).sum(1))


def test_a_signed_loop_with_a_step_counts_its_iterations(libs):
    assert summaries(libs[True], "strided") == 1
    a = np.arange(16 * 16, dtype=np.float32)
    out = np.zeros(16, np.float32)
    with metal_kernel.check() as report:
        libs[True].strided(a, out, 12, threads=16, group_size=16, arg_casts={2: "int32"})
    assert report.ok, str(report)
    np.testing.assert_allclose(out, a.reshape(16, 16)[:, 0:16:3].sum(1))
    short = a[:16 * 16 - 1].copy()  # the last iteration of the last thread reads a[255]
    report = both(libs, lambda lib: lib.strided(short, out, 12, threads=16, group_size=16, arg_casts={2: "int32"}))
    assert [(f.kind, f.thread, f.offset) for f in report.findings] == [("oob", (15, 0, 0), 255 * 4)]


def test_threadgroup_reads_past_the_array_on_a_late_iteration(libs):
    assert summaries(libs[True], "tg_rows") == 1
    x = np.ones(64, np.float32)
    out = np.zeros(64, np.float32)
    report = both(libs, lambda lib: lib.tg_rows(x, out, 17, threads=64, group_size=64, arg_casts={2: "int32"}))
    assert {f.kind for f in report.findings} == {"oob"}
    f = report.findings[0]
    assert f.address_space == "threadgroup" and f.offset == 256 and f.line == "loops.metal:22"
    clean = both(libs, lambda lib: lib.tg_rows(x, out, 16, threads=64, group_size=64, arg_casts={2: "int32"}))
    assert clean.ok, str(clean)


def test_a_write_after_summarised_reads_races_with_them(libs):
    assert summaries(libs[True], "read_then_write") == 1
    x = np.ones(64, np.float32)
    report = both(libs, lambda lib: lib.read_then_write(x, np.zeros(64, np.float32), threads=64, group_size=64),
                  schedules=1)
    races = [f for f in report.findings if f.kind == "race"]
    assert races and races[0].line == "loops.metal:32" and races[0].other.line == "loops.metal:31"


def test_a_write_before_the_loop_in_the_same_epoch_races_with_its_reads(libs):
    x = np.ones(64, np.float32)
    report = both(libs, lambda lib: lib.write_then_read(x, np.zeros(64, np.float32), threads=64, group_size=64),
                  schedules=1)
    races = [f for f in report.findings if f.kind == "race"]
    assert races and {races[0].line, races[0].other.line} == {"loops.metal:40", "loops.metal:42"}


def test_uninitialised_reads_in_a_summarised_loop_are_found(libs):
    x = np.ones(64, np.float32)
    report = both(libs, lambda lib: lib.half_written(x, np.zeros(64, np.float32), threads=64, group_size=64),
                  schedules=1)
    assert [f.kind for f in report.findings] == ["uninit"] and report.findings[0].line == "loops.metal:51"


def test_an_access_that_does_not_run_every_iteration_is_not_summarised(libs):
    # Summarised, each thread's conditional read would count as reading all
    # of s, and its store to s[lid] would race with the others' reads.
    assert summaries(libs[True], "picked") == 1  # the loop's mask[k], not s[k]
    mask = np.arange(64, dtype=np.uint32)
    out = np.zeros(64, np.float32)
    report = both(libs, lambda lib: lib.picked(mask, out, threads=64, group_size=64))
    assert report.ok, str(report)
    np.testing.assert_allclose(out, np.arange(64))


def test_a_device_race_in_a_loop_is_found(libs):
    a = np.ones(64, np.float32)
    report = both(libs, lambda lib: lib.sum_into(a, np.zeros(8, np.float32), threads=64, group_size=32),
                  schedules=1)
    assert "race" in {f.kind for f in report.findings}


def test_lanes_that_talk_after_a_simdgroup_barrier_stay_clean(libs):
    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    report = both(libs, lambda lib: lib.lanes(x, out, threads=64, group_size=64))
    assert report.ok, str(report)
    np.testing.assert_allclose(out, np.repeat(x.reshape(2, 32).sum(1), 32))


def test_the_benchmarks_tiled_matmul_is_summarised_and_clean():
    spec = importlib.util.spec_from_file_location("perf_kernels", ROOT / "benchmarks" / "perf" / "kernels.py")
    kernels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(kernels)
    lib = metal_kernel.compile_shader(kernels.MSL)
    assert summaries(lib, "matmul_tiled") == 1  # its inner loop, the threadgroup tiles' reads
    n = 64
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    with metal_kernel.check() as report:
        lib.matmul_tiled(a, b, c, n, threads=[n, n], group_size=[16, 16], arg_casts={3: "int32"})
    assert report.ok, str(report)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


# Corpus kernels whose checked builds have summarised loops (an out-of-bounds
# read, races and clean reductions, softmax and matmul among them).
SUMMARISED = ("oob_tile_edge", "oob_softmax_le", "race_mem_none", "race_softmax_broadcast", "race_matmul_reload",
              "clean_scan_simd_prefix", "clean_softmax_simd", "clean_softmax_tg", "clean_matmul_tiled")


def test_corpus_kernels_with_summaries_report_what_they_did_without(monkeypatch):
    from corpus import BUGGY, CLEAN, HEADER

    cases = [c for c in BUGGY + CLEAN if c.name in SUMMARISED]
    assert len(cases) == len(SUMMARISED)
    source = HEADER + "\n".join(c.source for c in cases)
    found = {}
    for on in (True, False):
        monkeypatch.setenv("METAL_KERNEL_CHECK_SUMMARIES", "1" if on else "0")
        lib = metal_kernel.compile_shader(source + f"// summaries {on}\n", source_name="corpus.metal")
        if on:
            assert all(summaries(lib, c.name) for c in cases)
        for c in cases:
            with metal_kernel.check() as report:
                c.run(lib)
            found[(c.name, on)] = _keys(report.findings)
    for c in cases:
        assert found[(c.name, True)] == found[(c.name, False)], c.name
        assert bool(found[(c.name, True)]) == c.name.startswith(("oob", "race")), c.name
