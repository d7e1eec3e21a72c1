"""Shuffles with a width below 32 read only their own segment: a lane whose
source lies past its segment keeps its value in CUDA and reads no other
lane, so the port must not read one either (the next segment's lanes may be
past the threadgroup's end, where a Metal simd read is undefined: llm.c's
matmul_backward_bias_kernel8/9 reduce in segments of 4)."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda

SOURCE = r"""
__global__ void segment_sums(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.0f;
    v += __shfl_down_sync(0xffffffff, v, 1, 4);
    v += __shfl_down_sync(0xffffffff, v, 2, 4);
    float u = __shfl_up_sync(0xffffffff, v, 1, 4);
    float w = __shfl_xor_sync(0xffffffff, v, 2, 4);
    if (i < n) out[i] = v + 0.5f * u + 0.25f * w;
}
"""


@pytest.mark.parametrize("block", [36, 12])
def test_width_shuffles_in_a_partial_simdgroup(block):
    # 36 threads: the second simdgroup has lanes 0-3 only; 12: lanes 12-31 of
    # the only simdgroup are inactive, next to the last segment.
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, block).astype(np.float32)
    p = port_cuda(SOURCE, filename="segments.cu")
    res = p.verify("segment_sums", np.full(block, np.nan, np.float32), x, block, grid=1, block=block)
    assert res.ok, str(res)
    assert not res.port_findings, str(res)


# llm.c's matmul_backward_bias_kernel8/9 (block 4 x 8 x blockDim.z) reduce
# rows r = lane, lane + 4, ... < blockDim.z in segments of 4 lanes. With
# blockDim.z < 4 some lanes of each segment skip the loop, and the full-mask
# shuffles of the others read them: undefined in CUDA (a source lane that
# does not take part), undefined in Metal. The original is at fault, not the
# translation: the CUDA runtime (port/include/mkcuda/warp.h) gives 0 for such
# a source, as an H200 does once the lane has exited, and its checked build
# reports the read, as the port's does (and MK1035 flags the shuffle).
SKIPPING = r"""
__global__ void skipping_rows(float* out, const float* x) {
    int d = threadIdx.x, c = threadIdx.y;
    float a = 0.f;
    for (int r = d; r < blockDim.z; r += 4) {
        float v = x[r * 8 + c];
        v += __shfl_down_sync(0xffffffff, v, 1, 4);
        v += __shfl_down_sync(0xffffffff, v, 2, 4);
        a += v;
    }
    if (d == 0 && threadIdx.z == 0) out[c] = a;
}
"""


@pytest.mark.parametrize("depth", [1, 4])
def test_lanes_that_skip_the_loop_are_read_by_the_original_too(depth):
    p = port_cuda(SKIPPING, filename="skipping.cu")
    assert {d.code for d in p.diagnostics} == {"MK1035"}
    x = np.arange(64, dtype=np.float32)
    res = p.verify("skipping_rows", np.full(8, np.nan, np.float32), x, grid=1, block=(4, 8, depth))
    assert all(b.match for b in res.buffers), str(res)  # both read 0 from the lanes that skipped
    if depth == 4:  # every lane runs the loop: nothing inactive is read
        assert res.ok, str(res)
    else:
        f = res.port_findings[0]
        assert f.kind == "inactive-lane" and f.function.startswith("mk_shfl_down"), str(res)
        assert any("reads lane 1 (thread (1,0,0))" in x for x in f.details), f.details
        o = res.original_findings[0]  # the first shuffle's read, at the user's line
        assert o.kind == "inactive-lane" and o.line == "skipping.cu:7", str(res)
        assert any("reads lane 1 (thread (1,0,0))" in x for x in o.details), o.details
