"""Values defined as the thread's x or lin plus a value no thread differs in
(`i = tg * n + lid` with n from a buffer), live across a barrier, are
staged as that difference (runtime/workitem/uniformity.py affine_values):
the region code adds the thread id back, so accesses through them stay
consecutive. Checked with poisoned outputs against numpy, by finding the
staged values in the descriptor, and with a value whose difference is not
the same in every thread (64-bit, wrapping in 32), which the driver must
catch and run thread by thread."""


import numpy as np
import pytest

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

// i is lin plus a uniform, live across the barrier (as a 64-bit index).
kernel void live_index(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                       constant uint& n [[buffer(2)]], uint tg [[threadgroup_position_in_grid]],
                       uint lid [[thread_position_in_threadgroup]], uint lsize [[threads_per_threadgroup]]) {
  threadgroup float buf[1024];
  const uint i = tg * n + lid;
  buf[lid] = x[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[i] = buf[(lid + 1) % lsize] - buf[lid];
}

// A 2-D group: col is x plus a uniform, but the live index also holds row,
// which differs between rows (not staged; checked for its results).
kernel void live_column(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                        constant uint& n [[buffer(2)]], uint2 tg [[threadgroup_position_in_grid]],
                        uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[16][16];
  const uint col = tg.x * n + lid.x;
  const uint row = tg.y * 16 + lid.y;
  buf[lid.y][lid.x] = x[row * 64 + col];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[row * 64 + col] = buf[lid.y][(lid.x + 1) & 15u] * 2.0f;
}

// r is y plus a uniform, live across the barrier as itself.
kernel void live_row(device float* out [[buffer(0)]], constant uint& n [[buffer(1)]],
                     uint2 tg [[threadgroup_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]],
                     uint2 gsize [[threads_per_grid]]) {
  threadgroup float buf[8][32];
  const uint r = tg.y * n + lid.y;
  buf[lid.y][lid.x] = float(lid.x);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint gy = tg.y * 8 + lid.y, gx = tg.x * 32 + lid.x;
  out[gy * gsize.x + gx] = float(r) * 1000.0f + buf[lid.y][31 - lid.x];
}

// The same with y: rows 4..7 wrap when u is 2^32 - 4.
kernel void wrapping_rows(device float* out [[buffer(0)]], constant uint& u [[buffer(1)]],
                          uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup ulong wide[8][32];
  const ulong w = ulong(lid.y + u);
  wide[lid.y][lid.x] = w;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid.y * 32 + lid.x] = float(w >> 28) + float(wide[7 - lid.y][lid.x] & 1);
}

// w = lid + u in 32 bits, widened: with u near 2^32 the 32-bit sum wraps
// for some threads, so w - lid is not one number: the driver's check must
// catch it and run the threads one at a time.
kernel void wrapping(device float* out [[buffer(0)]], constant uint& u [[buffer(1)]],
                     uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[256];
  threadgroup ulong wide[256];
  const ulong w = ulong(lid + u);
  buf[lid] = float(lid);
  wide[lid] = w;  // w itself (64 bits) before the barrier, so that it is what lives across it
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = float(w >> 28) + buf[255 - lid] + float(wide[255 - lid] & 1);
}
"""


@pytest.fixture(scope="module")
def built(compile_with_flags):
    """The library, and the affine flags of the staged values in each
    kernel's descriptor."""
    lib, flags = compile_with_flags(SOURCE)
    return lib, [f for _, f in flags]


def test_the_values_are_staged_as_differences(built):
    _, flags = built
    # live_index's i and wrapping's w (x or lin plus a number: one and the
    # same in 1-D groups), live_row's r (y plus a number). live_column's
    # live index mixes rows and columns: not staged (a correctness case).
    assert sorted(f & 3 for f in flags if f & 3) in ([1, 1, 3, 3], [1, 2, 3, 3])  # and wrapping_rows's w


@pytest.mark.parametrize("n,group", [(256, 256), (100, 128), (7, 32)])
def test_live_index(built, n, group):
    lib, _ = built
    groups = 9
    x = np.random.default_rng(n).standard_normal(groups * n + group).astype(np.float32)
    out = np.full_like(x, np.nan)
    lib.live_index(x, out, n, threads=[groups * group], group_size=[group], arg_casts={2: "int32"})
    expect = np.full_like(x, np.nan)
    for t in range(groups):
        # overlapping groups (n < group) write the same elements: the last group's values stand
        seg = x[t * n:t * n + group]
        expect[t * n:t * n + group] = np.roll(seg, -1) - seg
    if n >= group:
        np.testing.assert_array_equal(out, expect)
    else:  # groups overlap: every written element holds some group's value
        assert not np.isnan(out[:groups * n]).any()


def test_live_column_in_a_2d_group(built):
    lib, _ = built
    x = np.random.default_rng(3).standard_normal(64 * 64).astype(np.float32)
    out = np.full_like(x, np.nan)
    lib.live_column(x, out, 16, threads=[64, 64], group_size=[16, 16], arg_casts={2: "int32"})
    tiles = x.reshape(4, 16, 4, 16)
    expect = np.roll(tiles, -1, axis=3) * 2.0
    np.testing.assert_array_equal(out, expect.reshape(-1))


@pytest.mark.parametrize("u", [0, 5, 2**32 - 128, 2**32 - 1])
def test_threads_that_disagree_run_one_at_a_time(built, u):
    lib, _ = built
    out = np.full(256, np.nan, np.float32)
    as_int32 = u - 2**32 if u >= 2**31 else u  # the same 32 bits
    lib.wrapping(out, as_int32, threads=256, group_size=256, arg_casts={1: "int32"})
    lid = np.arange(256, dtype=np.uint64)
    w = (lid + np.uint64(u)) & np.uint64(0xFFFFFFFF)
    expect = ((w >> np.uint64(28)).astype(np.float32) + (255 - lid).astype(np.float32)
              + (w[::-1] & np.uint64(1)).astype(np.float32))
    np.testing.assert_array_equal(out, expect)


@pytest.mark.parametrize("n", [8, 3, 0])
def test_live_row(built, n):
    lib, _ = built
    out = np.full((16, 64), np.nan, np.float32)
    lib.live_row(out, n, threads=[64, 16], group_size=[32, 8], arg_casts={1: "int32"})
    gy, gx = np.mgrid[0:16, 0:64]
    r = (gy // 8) * n + gy % 8
    np.testing.assert_array_equal(out, r * 1000.0 + (31 - gx % 32))


@pytest.mark.parametrize("u", [0, 2**32 - 4])
def test_rows_that_disagree_run_one_at_a_time(built, u):
    lib, _ = built
    out = np.full(256, np.nan, np.float32)
    lib.wrapping_rows(out, u - 2**32 if u >= 2**31 else u, threads=[32, 8], group_size=[32, 8],
                      arg_casts={1: "int32"})
    y = np.repeat(np.arange(8, dtype=np.uint64), 32)
    w = (y + np.uint64(u)) & np.uint64(0xFFFFFFFF)
    expect = (w >> np.uint64(28)).astype(np.float32) + (w.reshape(8, 32)[::-1].reshape(-1) & np.uint64(1)).astype(
        np.float32)
    np.testing.assert_array_equal(out, expect)
