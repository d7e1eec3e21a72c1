"""Staged values every thread of a region call computes alike skip the
driver's comparison (runtime/workitem/run_invariance.py, mk/workitem.h
run_span): a loop counter across barriers is flagged, and values that can
differ between the threads of one call are not: a load from a buffer
(another thread may store to it in the same region), a value that depends
on the path taken, floating point. Checked in the descriptors and by
running kernels whose threads do disagree: each thread must find after the
barrier the value it had before it."""

import numpy as np
import pytest

HEADER = "#include <metal_stdlib>\nusing namespace metal;\n"

# A loop over tiles with two barriers: t is staged at both.
TILED_SUM = HEADER + r"""
kernel void tiled_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      constant uint& n [[buffer(2)]], uint lid [[thread_position_in_threadgroup]],
                      uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float tile[64];
  float acc = 0.0f;
  for (uint t = 0; t < n; t += 64) {
    tile[lid] = x[tg * n + t + lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    acc += tile[63 - lid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[tg * 64 + lid] = acc;
}
"""

# Staged, never flagged: v is loaded from a buffer (in another kernel, or
# another thread of the region, may have stored to it), s depends on the
# path taken (a division that may fault keeps it a branch, not a select),
# f is floating point and so is the integer q is computed from.
FROM_BUFFER = HEADER + r"""
kernel void from_buffer(device const uint* cfg [[buffer(0)]], device uint* out [[buffer(1)]],
                        uint lid [[thread_position_in_threadgroup]]) {
  threadgroup uint sink[256];
  const uint v = cfg[0] * 3u;
  sink[lid] = lid;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = v + sink[255 - lid];
}
"""
FROM_PATH = HEADER + r"""
kernel void from_path(device const uint* cfg [[buffer(0)]], device uint* out [[buffer(1)]],
                      uint lid [[thread_position_in_threadgroup]], uint lsize [[threads_per_threadgroup]]) {
  threadgroup uint sink[256];
  uint s = 22u;
  if (cfg[0] == 7u) s = 2816u / lsize;
  sink[lid] = lid;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = s + sink[255 - lid];
}
"""
FLOAT_COUNTER = HEADER + r"""
kernel void float_counter(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                          uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float tile[64];
  float f = 0.5f;
  for (uint t = 0; t < n; ++t) {
    tile[lid] = f * float(lid);
    const uint q = uint(f * 4.0f);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[t * 64 + lid] = tile[63 - lid] + float(q);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    f = f * 1.5f;
  }
}
"""

# Threads that do disagree (v is loaded after thread 100 stored to it in
# the same region: threads before it in the group's order load 0, the
# others 7): each must find its own value after the barrier.
RACY_LOAD = HEADER + r"""
kernel void racy_load(device uint* flag [[buffer(0)]], device uint* before [[buffer(1)]],
                      device uint* after [[buffer(2)]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup uint sink[256];
  if (lid == 100) flag[0] = 7;
  const uint v = flag[0];
  before[lid] = v;
  sink[lid] = lid;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  after[lid] = v + sink[255 - lid] - (255 - lid);
}
"""


RUN_INVARIANT = 8


def test_a_loop_counter_is_flagged_at_both_barriers(compile_with_flags):
    _, flags = compile_with_flags(TILED_SUM)
    counters = [f for _, f in flags if not f & 3]  # t; the others are affine (x plus a number)
    assert len(counters) == 2 and all(f & RUN_INVARIANT for f in counters), flags


@pytest.mark.parametrize("source", [FROM_BUFFER, FROM_PATH], ids=["load", "path"])
def test_values_that_may_differ_are_not_flagged(compile_with_flags, source):
    _, flags = compile_with_flags(source)
    assert flags == [("i32", 0)], flags  # staged (uniform), compared by the driver


def test_floating_point_is_not_flagged(compile_with_flags):
    _, flags = compile_with_flags(FLOAT_COUNTER)
    # f (float), q (i32, from f) and the counter t (i64): only t is flagged
    assert sorted({t for t, _ in flags}) == ["float", "i32", "i64"], flags
    assert all(bool(f & RUN_INVARIANT) == (t == "i64") for t, f in flags), flags


@pytest.mark.parametrize("n,groups", [(64, 3), (256, 5), (640, 2)])
def test_tiled_sum(compile_with_flags, n, groups):
    lib, _ = compile_with_flags(TILED_SUM)
    x = np.random.default_rng(n).standard_normal(groups * n + 64).astype(np.float32)
    out = np.full(groups * 64, np.nan, np.float32)
    lib.tiled_sum(x, out, n, threads=groups * 64, group_size=64, arg_casts={2: "int32"})
    tiles = x[:groups * n].reshape(groups, n // 64, 64)
    np.testing.assert_allclose(out.reshape(groups, 64), tiles[:, :, ::-1].sum(axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cfg", [7, 8])
def test_staged_values_from_buffers_and_paths(compile_with_flags, cfg):
    lib, _ = compile_with_flags(FROM_BUFFER + FROM_PATH[len(HEADER):])
    c = np.array([cfg], np.uint32)
    out = np.full(256, 0xDEADBEEF, np.uint32)
    lib.from_buffer(c, out, threads=256, group_size=256)
    np.testing.assert_array_equal(out, 3 * cfg + np.arange(255, -1, -1))
    lib.from_path(np.array([cfg, 0], np.uint32), out, threads=256, group_size=256)
    np.testing.assert_array_equal(out, (11 if cfg == 7 else 22) + np.arange(255, -1, -1))


def test_threads_that_disagree_keep_their_own_value(compile_with_flags):
    lib, _ = compile_with_flags(RACY_LOAD)
    flag = np.zeros(1, np.uint32)
    before = np.full(256, 0xDEADBEEF, np.uint32)
    after = np.full(256, 0xDEADBEEF, np.uint32)
    lib.racy_load(flag, before, after, threads=256, group_size=256)
    assert set(before.tolist()) == {0, 7}, set(before.tolist())  # the race did split the group
    np.testing.assert_array_equal(after, before)
