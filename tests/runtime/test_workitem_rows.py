"""How the work-item loops walk the threads of a group (runtime/workitem/,
loop_text): rows of x, cut at simdgroup boundaries in kernels with simd
functions; whole simdgroups that start at a multiple of 32 and fit in the row
go through a loop of exactly 32 threads, the rest piece by piece. These
kernels put simdgroup boundaries at the start, the middle and across rows, in
full and partial groups, with lane-dependent stores and regions that end at
two different points (the summary loop), and are checked against a numpy
model of Metal's semantics, in both execution modes."""

import numpy as np
import pytest

import metal_kernel
from metal_kernel.runtime.compiler import workitem_enabled

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

// 2-D groups. Region 0 ends at simd_sum (every lane active); region 1 stores
// lane-dependently and ends at a barrier; region 2 ends at simd_max for some
// lanes of simdgroups 0 and 1 and returns for the others (two exits);
// region 3 stores from one lane.
kernel void simd_rows(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      device float* part [[buffer(2)]], device float* first [[buffer(3)]],
                      uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]],
                      uint2 tpg [[threads_per_grid]], uint2 tg [[threadgroup_position_in_grid]],
                      uint2 ntg [[threadgroups_per_grid]], uint2 tsize [[threads_per_threadgroup]],
                      uint li [[thread_index_in_threadgroup]], uint lane [[thread_index_in_simdgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partials[32];
  const uint at = gid.y * tpg.x + gid.x;
  const uint group = tg.y * ntg.x + tg.x;
  const float v = x[at];
  const float s = simd_sum(v);
  if (lane == 0) partials[sg] = s;
  if (lane == 5) first[group * 32 + sg] = v;
  y[at] = s + float(lid.x) * 1000.0f + float(lid.y) * 100000.0f + float(li % 7);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint nsg = (tsize.x * tsize.y + 31) / 32;
  if (sg >= 2 || lane % 3 == 1) return;
  const float w = partials[lane % nsg] + float(lane);
  const float t = simd_max(w);
  if (lane == 2) part[group * 2 + sg] = t;
}

// The threads outside [span.x, span.y) return: the others are consecutive,
// and the driver resolves their simd calls from the span alone (a simdgroup
// entered part of the way, whole ones, one left part of the way).
kernel void simd_span(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      constant uint2& span [[buffer(2)]], uint gid [[thread_position_in_grid]],
                      uint li [[thread_index_in_threadgroup]]) {
  threadgroup float buf[1024];
  const float v = x[gid];
  buf[li] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (li < span.x || li >= span.y) { y[gid] = -1.0f; return; }
  const float s = simd_sum(v);
  const float m = simd_prefix_exclusive_sum(v);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = s * 1000.0f + m + buf[span.x] * 0.5f;
}

// 1-D: a shuffle (reads the lane argument) next to reductions (which store
// none) in the same rounds, divergent.
kernel void simd_mixed(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                       uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  const float v = x[gid];
  float r;
  if (lane % 2 == 0) r = simd_shuffle(v, (lane + 2) % 32);
  else r = simd_sum(v);
  const float m = simd_min(r);
  y[gid] = r + m * 0.5f + simd_shuffle_down(v, 1u) * 0.25f;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


# fiber_lib and both: tests/runtime/conftest.py


def test_modes(lib, fiber_lib):
    want = "workitem-loops" if workitem_enabled() else "fibers"
    assert lib.simd_rows.execution_mode == want
    assert lib.simd_mixed.execution_mode == want
    assert lib.simd_span.execution_mode == want
    assert fiber_lib.simd_rows.execution_mode == "fibers"


def _model_rows(x, grid, tsize):
    """numpy model of simd_rows: y, part, first (NaN where never written)."""
    gx, gy = grid
    tx, ty = tsize
    ntg = (-(-gx // tx), -(-gy // ty))
    y = np.full(gx * gy, np.nan, np.float32)
    part = np.full(ntg[0] * ntg[1] * 2, np.nan, np.float32)
    first = np.full(ntg[0] * ntg[1] * 32, np.nan, np.float32)
    for gyi in range(ntg[1]):
        for gxi in range(ntg[0]):
            group = gyi * ntg[0] + gxi
            sx, sy = min(tx, gx - gxi * tx), min(ty, gy - gyi * ty)  # this group's threads
            n = sx * sy
            nsg = -(-n // 32)  # threads_per_threadgroup is this group's shape
            at = np.empty(n, np.int64)
            lx = np.empty(n, np.int64)
            ly = np.empty(n, np.int64)
            for li in range(n):
                lx[li], ly[li] = li % sx, li // sx
                at[li] = (gyi * ty + ly[li]) * gx + gxi * tx + lx[li]
            v = x[at]
            partials = np.full(32, np.nan, np.float32)
            s = np.empty(n, np.float32)
            for s0 in range(0, n, 32):
                lanes = slice(s0, min(s0 + 32, n))
                s[lanes] = v[lanes].sum(dtype=np.float32)
                partials[s0 // 32] = s[s0]
                if s0 + 5 < n:
                    first[group * 32 + s0 // 32] = v[s0 + 5]
            li = np.arange(n)
            y[at] = s + lx * 1000.0 + ly * 100000.0 + (li % 7)
            for sgi in range(min(2, -(-n // 32))):
                act = [l for l in range(32) if sgi * 32 + l < n and l % 3 != 1]
                w = np.array([partials[l % nsg] + np.float32(l) for l in act], np.float32)
                if 2 in act:
                    part[group * 2 + sgi] = w.max()
    return y, part, first


@pytest.mark.parametrize("grid,tsize", [
    ((130, 7), (64, 3)),     # rows of 2 whole simdgroups; partial groups of 2 x 3 and 64 x 1
    ((232, 4), (96, 2)),     # rows of 3 simdgroups; the partial group (40 wide) cuts rows mid-simdgroup
    ((48 * 3 + 5, 9), (48, 4)),  # simdgroups start mid-row: piece, whole, piece
    ((256 * 3 + 77, 1), (256, 1)),
    ((32, 6), (32, 4)),      # one simdgroup per row
    ((20, 20), (16, 16)),    # rows shorter than a simdgroup
])
def test_simd_rows(both, grid, tsize):
    rng = np.random.default_rng(grid[0] * 31 + tsize[0])
    # small integers: every sum is exact whatever the order
    x = rng.integers(-8, 9, grid[0] * grid[1]).astype(np.float32)
    ntg = (-(-grid[0] // tsize[0])) * (-(-grid[1] // tsize[1]))
    y = np.full(grid[0] * grid[1], np.nan, np.float32)
    part = np.full(ntg * 2, np.nan, np.float32)
    first = np.full(ntg * 32, np.nan, np.float32)
    both.simd_rows(x, y, part, first, threads=grid, group_size=tsize)
    wy, wpart, wfirst = _model_rows(x, grid, tsize)
    np.testing.assert_array_equal(y, wy)
    np.testing.assert_array_equal(part, wpart)
    np.testing.assert_array_equal(first, wfirst)


@pytest.mark.no_metal_check  # reads lanes of a partial simdgroup that do not exist on purpose (the runtime gives 0)
@pytest.mark.parametrize("threads,group", [(256, 128), (200, 96), (77, 64)])
def test_shuffle_next_to_reductions(both, threads, group):
    rng = np.random.default_rng(threads)
    x = rng.integers(-8, 9, threads).astype(np.float32)
    y = np.full(threads, np.nan, np.float32)
    both.simd_mixed(x, y, threads=threads, group_size=group)
    want = np.empty(threads, np.float32)
    for g0 in range(0, threads, group):
        n = min(group, threads - g0)
        for s0 in range(0, n, 32):
            lanes = list(range(min(32, n - s0)))
            v = x[g0 + s0:g0 + s0 + len(lanes)]
            odd = [l for l in lanes if l % 2 == 1]
            r = np.empty(len(lanes), np.float32)
            for l in lanes:
                if l % 2 == 0:
                    src = (l + 2) % 32
                    # an inactive or missing source lane reads as 0
                    r[l] = v[src] if src < len(lanes) and src % 2 == 0 else 0.0
                else:
                    r[l] = v[odd].sum()
            m = r.min()
            # past the simdgroup: its own value; an inactive lane: 0
            down = np.array([v[l + 1] if l + 1 < len(lanes) else (v[l] if l + 1 >= 32 else 0.0)
                             for l in lanes], np.float32)
            want[g0 + s0:g0 + s0 + len(lanes)] = r + m * 0.5 + down * 0.25
    np.testing.assert_array_equal(y, want)


@pytest.mark.no_metal_check  # threads return before a barrier on purpose
@pytest.mark.parametrize("span", [(5, 77), (32, 96), (5, 200), (0, 256), (40, 41), (7, 7), (200, 256)])
@pytest.mark.parametrize("threads,group", [(512, 256), (256 + 100, 256), (96, 96)])
def test_consecutive_survivors(both, span, threads, group):
    rng = np.random.default_rng(span[0] * 7 + span[1])
    x = rng.integers(-8, 9, threads).astype(np.float32)
    y = np.full(threads, np.nan, np.float32)
    both.simd_span(x, y, np.array(span, np.uint32), threads=threads, group_size=group)
    want = np.full(threads, -1.0, np.float32)
    for g0 in range(0, threads, group):
        n = min(group, threads - g0)
        for s0 in range(0, n, 32):
            act = [li for li in range(s0, min(s0 + 32, n)) if span[0] <= li < span[1]]
            if not act:
                continue
            v = x[g0 + np.array(act)]
            s = v.sum(dtype=np.float32)
            m = np.concatenate([[0.0], np.cumsum(v)[:-1]]).astype(np.float32)
            want[g0 + np.array(act)] = s * 1000.0 + m + x[g0 + span[0]] * 0.5
    np.testing.assert_array_equal(y, want)


_PAIR_IR = """define void @f(i32 %x, i32 %y, ptr %p) {
  %a = insertelement <2 x i32> poison, i32 %x, i64 0
  %b = insertelement <2 x i32> %a, i32 %y, i64 1
  %c = bitcast <2 x i32> %b to i64
  %lo = trunc i64 %c to i32
  %hi = lshr i64 %c, 32
  %lo64 = and i64 %c, 4294967295
  %other = lshr i64 %c, 16
  store i64 %c, ptr %p
  ret void
}"""


def test_halves_of_a_cast_id_pair_are_the_ids():
    # uint2 thread ids read as fields come out of clang as bit arithmetic on
    # one i64; the loop vectoriser only sees affine addresses once each half
    # is the scalar it was made from.
    from metal_kernel.runtime.workitem import fold_pair_bitcasts

    out = fold_pair_bitcasts(_PAIR_IR)
    assert "%lo = or i32 %x, 0" in out
    assert "%hi = zext i32 %y to i64" in out
    assert "%lo64 = zext i32 %x to i64" in out
    assert "%other = lshr i64 %c, 16" in out  # not a half: untouched
    assert "store i64 %c, ptr %p" in out


def test_a_pair_with_an_unknown_half_is_left_alone():
    from metal_kernel.runtime.workitem import fold_pair_bitcasts

    text = _PAIR_IR.replace("insertelement <2 x i32> poison, i32 %x, i64 0",
                            "insertelement <2 x i32> %v, i32 %x, i64 0").replace(
        "%b = insertelement <2 x i32> %a, i32 %y, i64 1", "%b = bitcast <2 x i32> %a to <2 x i32>")
    assert fold_pair_bitcasts(text) == text
