"""Regions only the first threads of a row work in (`if (lid < s)` between
barriers): runtime/workitem/prefix_guard.py finds them, and the region
loops call the step for x < s only, storing the others' state directly.
Results are checked with poisoned outputs, against the same kernels on
fibers (METAL_KERNEL_WORKITEM_LOOPS=0) where they must agree bit for bit."""

import numpy as np
import pytest

import metal_kernel
from metal_kernel.runtime.workitem.prefix_guard import Guard, prefix_guard

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

// Unrolled levels: one guarded region per level, then `lid == 0`.
kernel void tree_max(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                     uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                     uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float m[128];
  m[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint half_ = 64; half_ != 0; half_ /= 2) {
    if (lid < half_) m[lid] = max(m[lid], m[lid + half_]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[tg] = m[0];
}

// 2-D groups: the guard is on x within each row; threads with x >= 3 and
// x > 4 leave their outputs alone (still NaN afterwards).
kernel void rows(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                 device float* out2 [[buffer(2)]],
                 uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]],
                 uint2 gsize [[threads_per_grid]]) {
  threadgroup float t[8][16];
  t[lid.y][lid.x] = x[gid.y * gsize.x + gid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid.x < 3) out[gid.y * gsize.x + gid.x] = t[lid.y][lid.x] + t[lid.y][lid.x + 5];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid.x <= 4) out2[gid.y * gsize.x + gid.x] = 2.0f * t[lid.y][lid.x];
}

// The benchmark's two-level reduction shape: after the barrier only the
// first simdgroup works (`sg == 0`, a guard on lin in a kernel whose rows
// are cut at simdgroups).
kernel void two_level(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      uint gid [[thread_position_in_grid]], uint tg [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                      uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float part[32];
  const float s = simd_sum(x[gid]);
  if (lane == 0) part[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    const float t = simd_sum(lane < nsg ? part[lane] : 0.0f);
    if (lane == 0) out[tg] = t;
  }
}

// 2-D groups, a bound on the index in the group that falls inside a row.
kernel void lin_rows(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                     uint2 gid [[thread_position_in_grid]], uint li [[thread_index_in_threadgroup]],
                     uint2 gsize [[threads_per_grid]]) {
  threadgroup float t[128];
  t[li] = x[gid.y * gsize.x + gid.x];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (li < 40) out[gid.y * gsize.x + gid.x] = t[li] + t[li + 1];
}
"""


@pytest.fixture(scope="module")
def libs():
    import os

    loops = metal_kernel.compile_shader(SOURCE)
    old = os.environ.get("METAL_KERNEL_WORKITEM_LOOPS")
    os.environ["METAL_KERNEL_WORKITEM_LOOPS"] = "0"
    try:
        fibers = metal_kernel.compile_shader(SOURCE)
    finally:
        if old is None:
            del os.environ["METAL_KERNEL_WORKITEM_LOOPS"]
        else:
            os.environ["METAL_KERNEL_WORKITEM_LOOPS"] = old
    assert loops.tree_max.execution_mode == "workitem-loops"
    assert fibers.tree_max.execution_mode == "fibers"
    return loops, fibers


def test_an_unrolled_tree_reduction_reduces_every_group(libs):
    x = np.random.default_rng(1).uniform(-1, 1, 128 * 300).astype(np.float32)
    got = []
    for lib in libs:
        out = np.full(300, np.nan, np.float32)
        lib.tree_max(x, out, threads=x.size, group_size=128)
        got.append(out)
    np.testing.assert_array_equal(got[0], x.reshape(300, 128).max(1))
    np.testing.assert_array_equal(got[0], got[1])


@pytest.mark.parametrize("grid", [(16, 8), (13, 8), (32, 7)])
def test_guards_on_x_hold_row_by_row_and_leave_the_other_threads_outputs(libs, grid):
    w, h = grid
    x = np.random.default_rng(2).uniform(-1, 1, w * h).astype(np.float32)
    results = []
    for lib in libs:
        out = np.full(w * h, np.nan, np.float32)
        out2 = np.full(w * h, np.nan, np.float32)
        lib.rows(x, out, out2, threads=[w, h], group_size=[16, 8])
        results.append((out.reshape(h, w), out2.reshape(h, w)))
    out, out2 = results[0]
    xs = x.reshape(h, w)
    lx = np.arange(w) % 16
    for r in range(h):
        for c in range(w):
            if lx[c] < 3:
                assert out[r, c] == xs[r, c] + xs[r, c + 5]
            else:
                assert np.isnan(out[r, c])
            if lx[c] <= 4:
                assert out2[r, c] == 2 * xs[r, c]
            else:
                assert np.isnan(out2[r, c])
    for a, b in zip(results[0], results[1]):
        np.testing.assert_array_equal(a, b)


STEP = """define internal i32 @__mk_wistep_2_1(ptr noalias readonly dereferenceable(1624) align 8 %v0, \
ptr noalias %mk.slots, ptr noalias %mk.stage, ptr %mk.frames, i32 %v1, i32 %v2, i32 %v3, i32 %v4) #25 {
mk.entry:
  %mk.a.v15 = alloca ptr
  br label %mk.resume1
mk.resume1:
  %mk.m32 = load ptr, ptr %v0, align 8
  store ptr %mk.m32, ptr %mk.a.v15
  PROLOGUE
  br label %mk.c1
mk.c1:
  %v21 = icmp PRED i32 %v1, CONST
  br i1 %v21, label %TRUE, label %FALSE
v22:
  %mk.l3 = load ptr, ptr %mk.a.v15
  store float 1.0, ptr %mk.l3, align 4
  br label %v29
v29:
  ret i32 2
}"""


def _step(pred="ult", const="128", prologue="", true="v22", false="v29"):
    text = (STEP.replace("PRED", pred).replace("CONST", const).replace("PROLOGUE", prologue)
            .replace("TRUE", true).replace("FALSE", false))
    return text.split("\n")


@pytest.mark.parametrize("pred,const,true,false,want", [
    ("ult", "128", "v22", "v29", Guard("x", 128, 2)),
    ("eq", "0", "v22", "v29", Guard("x", 1, 2)),
    ("ugt", "6", "v29", "v22", Guard("x", 7, 2)),   # no-op when x > 6: works for x < 7
    ("ne", "0", "v29", "v22", Guard("x", 1, 2)),
    ("ule", "4", "v22", "v29", Guard("x", 5, 2)),
    ("ugt", "6", "v22", "v29", None),     # works for the last threads: not a prefix
    ("eq", "3", "v22", "v29", None),      # one thread in the middle
    ("ult", "-1", "v22", "v29", None),
])
def test_prefix_guard_reads_the_condition_and_the_no_op_side(pred, const, true, false, want):
    assert prefix_guard(_step(pred, const, true=true, false=false)) == want


@pytest.mark.parametrize("prologue", [
    "call void @f()",
    "store float 0.0, ptr %mk.m32, align 4",
    "%q = load volatile i32, ptr %v0",
    "%q = atomicrmw add ptr %v0, i32 1 seq_cst",
])
def test_no_guard_when_anything_before_the_branch_has_an_effect(prologue):
    assert prefix_guard(_step(prologue=prologue)) is None


def test_no_guard_on_another_thread_coordinate():
    assert prefix_guard([line.replace("icmp ult i32 %v1", "icmp ult i32 %v2") for line in _step()]) is None


def test_a_guard_on_the_simdgroup_index_is_one_on_lin():
    # sg = lin >> 5 kept in a stack slot across the cut; `sg == 0`
    prologue = "%sg = lshr i32 %v4, 5\n  store i32 %sg, ptr %mk.a.sg\n  %sgl = load i32, ptr %mk.a.sg"
    step = [line.replace("icmp PRED i32 %v1, CONST", "icmp eq i32 %sgl, 0") for line in STEP.split("\n")]
    text = "\n".join(step).replace("PROLOGUE", prologue).replace("TRUE", "v22").replace("FALSE", "v29")
    assert prefix_guard(text.split("\n")) == Guard("lin", 32, 2)


@pytest.mark.parametrize("group", [256, 96, 64])
def test_only_the_first_simdgroup_works_after_the_barrier(libs, group):
    n = group * 40
    x = np.random.default_rng(4).uniform(-1, 1, n).astype(np.float32)
    got = []
    for lib in libs:
        out = np.full(n // group, np.nan, np.float32)
        lib.two_level(x, out, threads=n, group_size=group)
        got.append(out)
    np.testing.assert_allclose(got[0], x.reshape(-1, group).astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[0], got[1])


@pytest.mark.parametrize("grid", [(16, 8), (16, 16), (32, 8), (13, 8)])
def test_a_bound_on_the_index_in_the_group_cuts_rows_in_the_middle(libs, grid):
    w, h = grid
    x = np.random.default_rng(5).uniform(-1, 1, w * h).astype(np.float32)
    results = []
    for lib in libs:
        out = np.full(w * h, np.nan, np.float32)
        lib.lin_rows(x, out, threads=[w, h], group_size=[16, 8])
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    if w % 16:
        return  # partial groups: their own shape; the fibers' bits above are the reference
    got, xs = results[0].reshape(h, w), x.reshape(h, w)
    for r in range(h):
        for c in range(w):
            gx, gy = divmod(c, 16), divmod(r, 8)
            li = gx[1] + 16 * gy[1]
            if li < 40:  # t[li + 1]: the next thread in the group, which may start the next row
                nx, ny = (li + 1) % 16, (li + 1) // 16
                assert got[r, c] == xs[r, c] + xs[gy[0] * 8 + ny, gx[0] * 16 + nx]
            else:
                assert np.isnan(got[r, c])
