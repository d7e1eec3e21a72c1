"""Threadgroup memory checked in one group of each kind (check/invariant.py,
check/prove.py group_kinds, check/session.py _instrumented_run): a kernel
whose threadgroup accesses and control flow cannot differ between groups
of one kind (one shape, the same outcome of each edge condition) has its
threadgroup checks made in representative groups only. Every case below is
a bug the shortcut could hide if it were wrong: each must still be found,
and the same findings must come out with the shortcut off."""

from __future__ import annotations

import os
from contextlib import contextmanager

import numpy as np
import pytest

import metal_kernel
from metal_kernel.check.prove import group_kinds
from metal_kernel.check.session import checked_library

SRC = """#include <metal_stdlib>
using namespace metal;
kernel void tree_sum(device const float* x [[buffer(0)]], device float* partial [[buffer(1)]],
                     uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                     uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float buf[64];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = 32; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) partial[tg] = buf[0];
}
// The race happens in group 3 only: a branch on the group's position.
kernel void race_in_one_group(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]],
                              uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float slot[1];
  if (tg == 3) slot[0] = float(lid);  // BUG in group 3
  else if (lid == 0) slot[0] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) out[tg] = slot[0];
}
// Every thread stores its input to one slot: no race where a group's inputs
// are all equal (the stores leave the slot as it was), a race elsewhere.
kernel void same_slot(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                      uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float slot[1];
  slot[0] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) out[tg] = slot[0];
}
// The threadgroup index comes from the data.
kernel void index_from_data(device const uint* idx [[buffer(0)]], device float* out [[buffer(1)]],
                            uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  buf[lid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = buf[idx[gid]];
}
// Reads its neighbour: fine in full groups, an uninitialised read in the
// grid's last, partial group.
kernel void neighbour(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float v = buf[lid];
  if (lid + 1 < 64) v += buf[lid + 1];
  out[gid] = v;
}
// A branch on the global position (an edge condition): the group holding
// n differs from the others even when it is full.
kernel void guarded_by_the_grid(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                                constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                                uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  buf[lid] = gid < n ? x[gid] : 0.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (gid < n) out[gid] = buf[63 - lid];
}
// `flag` is only read, but the caller binds `out`'s memory to it: group 0
// sets the flag, and the groups that see it race in threadgroup memory.
kernel void flag_alias(device const uint* flag [[buffer(0)]], device uint* out [[buffer(1)]],
                       uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) {
  threadgroup uint slot[1];
  if (flag[0] == 7) slot[0] = lid;  // BUG once the flag is set
  else if (lid == 0) slot[0] = 1;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) out[tg] = tg == 0 ? 7 : slot[0];
}
// Threads past n write nothing; the group holding n reads what they did not
// write.
kernel void short_last_group(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                             constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                             uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  if (gid < n) buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = buf[63 - lid];
}
// Groups wholly past n race; the others are clean.
kernel void race_past_n(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                        uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float slot[64];
  if (gid >= n) slot[0] = float(lid);  // BUG past n
  else slot[lid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) out[tg] = slot[0];
}
// A condition over both axes of the grid: no kinds the pass can count.
kernel void diagonal(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                     uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]],
                     uint2 tg [[threadgroup_position_in_grid]]) {
  threadgroup float slot[64];
  if (gid.x + gid.y == n) slot[0] = float(lid.x);  // BUG on the diagonal
  else slot[lid.y * 8 + lid.x] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid.x == 0 && lid.y == 0) out[tg.y * 8 + tg.x] = slot[0];
}
// A loop counter that starts at the thread's global position: with n = 900
// and 256 threads, threads below 132 take 4 trips and the others 3, so the
// barrier in the loop diverges in group 2 only.
kernel void strided_from_gid(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                             constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                             uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float acc[64];
  acc[lid] = 0.0f;
  for (uint i = gid; i < n; i += 256) {
    acc[lid] += x[i];
    threadgroup_barrier(mem_flags::mem_threadgroup);  // BUG where the trips differ within a group
  }
  if (lid == 0) out[tg] = acc[0];
}
// Thread 0 rewrites slot 1, which thread 5 reads in the same epoch: a race
// wherever x's first element of the group is not 1 (elsewhere the store
// leaves the slot as it was, and is no access).
kernel void silent_then_read(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                             uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float slot[64];
  slot[lid] = 1.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) slot[1] = x[gid];  // BUG where x[gid] != 1
  out[gid] = lid == 5 ? slot[1] : 0.0f;
}
// A race in every group, and a loop bound from a read-only scalar.
kernel void race_everywhere(device float* out [[buffer(0)]], constant uint& reps [[buffer(1)]],
                            uint lid [[thread_position_in_threadgroup]], uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float acc[2];
  for (uint r = 0; r < reps; ++r) acc[r & 1] = float(lid + r);  // BUG: every thread, one slot
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) out[tg] = acc[0];
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SRC, source_name="reps.metal")


def _facts(lib, name: str) -> dict:
    k = getattr(lib, name)
    ck = getattr(checked_library(k._library), name)
    return ck._library._compiled.check_of(ck._entry)["kernels"][str(ck._entry.symbol)]


@contextmanager
def _representatives(on: bool):
    old = os.environ.get("METAL_KERNEL_CHECK_REPRESENTATIVES")
    os.environ["METAL_KERNEL_CHECK_REPRESENTATIVES"] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ["METAL_KERNEL_CHECK_REPRESENTATIVES"]
        else:
            os.environ["METAL_KERNEL_CHECK_REPRESENTATIVES"] = old


def _check(run, on=True):
    with _representatives(on), metal_kernel.check() as report:
        run()
    return report


def _summary(report) -> list[tuple]:
    # What a checked dispatch guarantees whichever thread reports first.
    return sorted((f.kind, f.line, f.buffer, f.address_space) for f in report.findings)


@pytest.mark.parametrize("name,invariant", [
    ("tree_sum", True), ("race_in_one_group", True), ("same_slot", True), ("index_from_data", False),
    ("neighbour", True), ("race_everywhere", True), ("guarded_by_the_grid", True), ("short_last_group", True),
    ("race_past_n", True), ("diagonal", True), ("silent_then_read", True)])
def test_the_analysis_accepts_only_group_invariant_threadgroup_behaviour(lib, name, invariant):
    assert bool(_facts(lib, name).get("tg_invariant")) is invariant


def test_a_clean_reduction_checks_threadgroup_memory_in_one_group_and_stays_right(lib):
    x = np.random.default_rng(0).random(64 * 40, dtype=np.float32)
    out = np.full(40, np.nan, np.float32)
    report = _check(lambda: lib.tree_sum(x, out, threads=x.size, group_size=64))
    assert report.ok, str(report)
    assert report.by_representatives == 1 and "one group of each kind" in str(report)
    np.testing.assert_allclose(out, x.reshape(40, 64).sum(1), rtol=1e-5)


def test_device_memory_is_still_checked_in_every_group(lib):
    # The partial sums' buffer is one short: the last group writes past it.
    # Threadgroup memory is clean and checked in group 0 only; the other
    # groups run checked for device memory.
    x = np.random.default_rng(1).random(64 * 40, dtype=np.float32)
    out = np.full(39, np.nan, np.float32)
    report = _check(lambda: lib.tree_sum(x, out, threads=x.size, group_size=64))
    assert report.by_representatives == 1
    assert [(f.kind, f.threadgroup, f.buffer) for f in report.findings] == [("oob", (39, 0, 0), (1, "partial"))]


def test_a_race_in_one_group_only_is_found_there(lib):
    out = np.full(8, np.nan, np.float32)
    report = _check(lambda: lib.race_in_one_group(out, threads=8 * 32, group_size=32))
    assert report.by_representatives == 0
    races = [f for f in report.findings if f.kind == "race"]
    assert races and all(f.threadgroup == (3, 0, 0) for f in races), str(report)


@pytest.mark.parametrize("kernel,groups,size,changed,group", [
    # Group 0 stores one value from every thread (silent stores: no race
    # there); group 2's threads store different values.
    ("same_slot", 4, 32, 2 * 32 + 5, 2),
    # Group 0's thread 0 rewrites slot 1 with what it holds before thread 5
    # reads it; group 3's stores a new value.
    ("silent_then_read", 6, 64, 3 * 64, 3)])
def test_silent_stores_in_the_representative_do_not_hide_a_race_elsewhere(lib, kernel, groups, size, changed, group):
    x = np.ones(groups * size, np.float32)
    x[changed] = 7.0
    out = np.full(x.size, np.nan, np.float32)
    report = _check(lambda: getattr(lib, kernel)(x, out, threads=x.size, group_size=size))
    assert report.by_representatives == 0
    races = [f for f in report.findings if f.kind == "race"]
    assert races and {f.threadgroup for f in races} == {(group, 0, 0)}, str(report)


def test_a_threadgroup_index_from_the_data_is_checked_in_every_group(lib):
    idx = np.zeros(4 * 64, np.uint32)
    idx[3 * 64 + 9] = 64  # one past the array, in group 3
    out = np.full(idx.size, np.nan, np.float32)
    report = _check(lambda: lib.index_from_data(idx, out, threads=idx.size, group_size=64))
    oob = [f for f in report.findings if f.kind == "oob"]
    assert oob and oob[0].threadgroup == (3, 0, 0) and oob[0].address_space == "threadgroup", str(report)


def test_the_partial_group_at_the_edge_is_a_representative_of_its_own(lib):
    n = 64 * 3 + 40
    x = np.ones(n, np.float32)
    out = np.full(n, np.nan, np.float32)
    report = _check(lambda: lib.neighbour(x, out, threads=n, group_size=64))
    uninit = [f for f in report.findings if f.kind == "uninit"]
    assert uninit and all(f.threadgroup == (3, 0, 0) for f in uninit), str(report)
    assert report.by_representatives == 0  # the representatives found something: every group checked


def test_a_read_only_buffer_that_shares_memory_with_a_written_one_is_not_taken_as_invariant(lib):
    assert _facts(lib, "flag_alias").get("tg_invariant")  # alone, the kernel is
    # The flag is set before the dispatch, so every group races whichever
    # order the checker runs them in (set only by group 0, the race showed
    # only where group 0 ran before another group read the flag).
    mem = np.zeros(64, np.uint32)
    mem[0] = 7
    report = _check(lambda: lib.flag_alias(mem, mem, threads=64 * 32, group_size=32))
    assert report.by_representatives == 0
    assert any(f.kind == "race" and f.address_space == "threadgroup" for f in report.findings), str(report)


def test_edge_conditions_make_kinds_of_groups_and_each_kind_is_checked(lib):
    x = np.ones(64 * 10, np.float32)
    # n a multiple of the group: every group takes `gid < n` whole.
    out = np.full(x.size, np.nan, np.float32)
    report = _check(lambda: lib.guarded_by_the_grid(x, out, np.uint32(x.size), threads=x.size, group_size=64))
    assert report.ok and report.by_representatives == 1, str(report)
    # n inside group 6: groups 6 to 9 read slots their threads past n never
    # wrote (group 6's 54 threads that read past its first 10 slots, every
    # thread of groups 7 to 9), groups 0 to 5 are clean. The occurrences are
    # folded into one finding, which names the group that hit it first: two
    # workers run groups 6 and 7 at once, so either.
    report = _check(lambda: lib.short_last_group(x, out, np.uint32(6 * 64 + 10), threads=x.size, group_size=64))
    uninit = [f for f in report.findings if f.kind == "uninit"]
    assert uninit and {f.threadgroup for f in uninit} <= {(g, 0, 0) for g in (6, 7, 8, 9)}, str(report)
    assert sum(f.count for f in uninit) == 54 + 3 * 64, str(report)
    # Groups 7 to 9 are wholly past n and race; groups 0 to 6 are clean.
    out = np.full(10, np.nan, np.float32)
    report = _check(lambda: lib.race_past_n(out, np.uint32(7 * 64), threads=x.size, group_size=64))
    races = [f for f in report.findings if f.kind == "race"]
    assert races and {f.threadgroup for f in races} <= {(7, 0, 0), (8, 0, 0), (9, 0, 0)}, str(report)


def test_a_loop_counter_starting_at_gid_is_not_taken_for_a_constant(lib):
    x = np.ones(900, np.float32)
    out = np.full(4, np.nan, np.float32)
    report = _check(lambda: lib.strided_from_gid(x, out, np.uint32(900), threads=256, group_size=64))
    assert report.findings and {f.threadgroup for f in report.findings} == {(2, 0, 0)}, str(report)
    assert {f.kind for f in report.findings} == {"divergence"}


def test_a_condition_over_two_axes_falls_back_to_checking_every_group(lib):
    out = np.full(64, np.nan, np.float32)
    report = _check(lambda: lib.diagonal(out, np.uint32(45), threads=(64, 64), group_size=(8, 8)))
    assert report.by_representatives == 0
    assert any(f.kind == "race" and f.address_space == "threadgroup" for f in report.findings), str(report)


def test_a_race_in_every_group_reads_the_same_with_the_shortcut_off(lib):
    def run():
        out = np.full(16, np.nan, np.float32)
        lib.race_everywhere(out, np.uint32(3), threads=16 * 32, group_size=32)
    on, off = _check(run, True), _check(run, False)
    assert [f.kind for f in on.findings] and _summary(on) == _summary(off)
    assert sum(f.count for f in on.findings) == sum(f.count for f in off.findings)


@pytest.mark.parametrize("grid,group,expect", [
    ((256, 1, 1), (64, 1, 1), [0]),
    ((250, 1, 1), (64, 1, 1), [0, 3]),
    ((64, 30, 1), (16, 8, 1), [0, 4 * 3]),
    ((20, 20, 3), (8, 8, 2), [0, 2, 3 * 2, 3 * 2 + 2, 9, 9 + 2, 9 + 6, 9 + 8]),
    ((5, 1, 1), (8, 1, 1), [0]),
])
def test_representatives_are_one_group_per_shape(grid, group, expect):
    ngroups = [-(-g // s) for g, s in zip(grid, group)]
    assert group_kinds({}, list(grid), list(group), ngroups, [], [], 8) == expect
