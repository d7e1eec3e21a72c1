"""Rows of 2-D and 3-D groups run together (runtime/workitem/emit_loop.py,
_jammed_rows): where a piece of a region starts a row that is a multiple of
16 wide and ROW_JAM rows of one z plane remain, one loop over x runs those
rows' threads. Kernels that read y get that loop, others do not; every
shape below (rows jammed, rows left over, z planes, narrow rows, partial
groups, one-row groups) must give the numpy model's result, outputs
poisoned first, in both execution modes."""

import re
import uuid

import numpy as np
import pytest

from metal_kernel.runtime.compiler import workitem_enabled
from metal_kernel.runtime.workitem import ROW_JAM

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
constant int token_TOKEN = 0;  // a new program each run (a comment would be preprocessed away)

// A per-thread dependency chain over its own row of a tile, tile after tile
// (the tiled matmul's shape), in groups of any shape; the tile loop's exit
// is uniform, so the region after its second barrier ends at two points.
kernel void row_chain(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                      constant uint& ntiles [[buffer(2)]],
                      uint3 gid [[thread_position_in_grid]], uint3 tpg [[threads_per_grid]],
                      uint3 lid [[thread_position_in_threadgroup]], uint3 tsz [[threads_per_threadgroup]]) {
  threadgroup float tile[1024];
  const uint total = tpg.x * tpg.y * tpg.z;
  const uint at = (gid.z * tpg.y + gid.y) * tpg.x + gid.x;
  const uint row = (lid.z * tsz.y + lid.y) * tsz.x;
  float acc = float(lid.y) - 0.5f * float(lid.z);
  for (uint t = 0; t < ntiles; ++t) {
    tile[row + lid.x] = a[t * total + at];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < tsz.x; ++k) acc = acc * 0.75f + tile[row + k] * float(k + 1 + lid.x);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[at] = acc;
}

// 1-D: never reads y.
kernel void flat_sum(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                     uint gid [[thread_position_in_grid]], uint li [[thread_index_in_threadgroup]]) {
  threadgroup float buf[256];
  buf[li] = a[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = buf[li] + buf[li ^ 1u];
}
"""


def _model(a, grid, tsize, ntiles):
    """numpy (float64) model of row_chain over a grid of `grid` threads in
    groups of `tsize` (edge groups partial, their tsz their own shape)."""
    gx, gy, gz = grid
    tx, ty, tz = tsize
    total = gx * gy * gz
    out = np.full(total, np.nan)
    for z in range(gz):
        for y in range(gy):
            for x0 in range(0, gx, tx):
                sx = min(tx, gx - x0)  # this group's width
                lz, ly = z % tz, y % ty
                at_row = (z * gy + y) * gx + x0
                acc = np.full(sx, ly - 0.5 * lz)
                lx = np.arange(sx)
                for t in range(ntiles):
                    vals = a[t * total + at_row: t * total + at_row + sx].astype(np.float64)
                    for k in range(sx):
                        acc = acc * 0.75 + np.float32(vals[k]) * (k + 1 + lx)
                out[at_row: at_row + sx] = acc
    return out


@pytest.fixture(scope="module")
def compiled(compile_with_ir):
    """The library, and the transformed IR it was built from."""
    return compile_with_ir(SOURCE.replace("TOKEN", uuid.uuid4().hex))  # a new source: compiled here


@pytest.mark.skipif(not workitem_enabled(), reason="work-item loops are off")
def test_only_kernels_that_read_y_get_the_jammed_loop(compiled):
    lib, text = compiled
    assert ROW_JAM > 1
    assert lib.row_chain.execution_mode == "workitem-loops"
    assert lib.flat_sum.execution_mode == "workitem-loops"
    bodies = re.findall(r"^define internal \{ i64, i64 \} @__mk_wiloop_\d+\(.*?^}$", text, re.MULTILINE | re.DOTALL)
    jammed = [b for b in bodies if re.search(r"^L\d+\.jam:", b, re.MULTILINE)]
    plain = [b for b in bodies if not re.search(r"^L\d+\.jam:", b, re.MULTILINE)]
    assert len(jammed) == 1 and len(plain) == 1, "row_chain (reads y) jammed, flat_sum (1-D) not"
    # the jammed loop calls the step once per row of the jam, each with its own y
    calls = re.findall(r"call i32 @__mk_wistep_\d+_1\(.*?i32 %jx1, i32 (%\S+),", jammed[0])
    assert len(calls) == ROW_JAM and len(set(calls)) == ROW_JAM


SHAPES = [
    ((32, 32, 1), (16, 16, 1)),   # whole rows, jammed 4 by 4
    ((64, 6, 1), (32, 6, 1)),     # 6 rows: one jam of 4, then 2 row by row
    ((16, 10, 3), (16, 5, 3)),    # z planes of 5 rows: a jam never crosses a plane
    ((24, 16, 1), (8, 8, 1)),     # rows of 8: not a multiple of 16, row by row
    ((96, 8, 2), (48, 4, 2)),     # 48 = 3 x 16 wide, one jam per plane
    ((40, 12, 1), (16, 4, 1)),    # partial groups 8 wide at the edge: row by row
    ((64, 1, 1), (64, 1, 1)),     # one row
    ((64, 16, 1), (64, 16, 1)),   # 1024 threads
]


@pytest.mark.parametrize("grid,tsize", SHAPES)
def test_rows_together_give_the_models_result(compiled, fiber_lib, grid, tsize):
    lib, _ = compiled
    ntiles = 3
    total = int(np.prod(grid))
    a = np.random.default_rng(sum(grid) + 7 * sum(tsize)).uniform(-1, 1, ntiles * total).astype(np.float32)
    want = _model(a, grid, tsize, ntiles)
    for build in (lib, fiber_lib):
        out = np.full(total, np.nan, np.float32)
        build.row_chain(a, out, ntiles, threads=list(grid), group_size=list(tsize), arg_casts={2: "int32"})
        assert not np.isnan(out).any(), f"{build.row_chain.execution_mode}: unwritten outputs"
        np.testing.assert_allclose(out, want, rtol=2e-5, atol=2e-5 * np.abs(want).max(),
                                   err_msg=build.row_chain.execution_mode)


def test_one_dimensional_kernel_unchanged(compiled):
    lib, _ = compiled
    a = np.arange(512, dtype=np.float32)
    out = np.full(512, np.nan, np.float32)
    lib.flat_sum(a, out, threads=[512], group_size=[256])
    np.testing.assert_array_equal(out, a + a[np.arange(512) ^ 1])
