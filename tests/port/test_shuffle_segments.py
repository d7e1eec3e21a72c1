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
