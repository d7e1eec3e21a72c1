"""verify on kernels that add floats atomically: the order of the adds is
free, so the sums (and what the kernel copies from them) are compared with
a tolerance derived from the reduction, and the checker's
schedule-dependence becomes a note; a port that computes something else
still fails."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda
from metal_kernel.port.to_metal.float_atomics import uses_float_atomics

# Every block adds its partial sums into a bfloat16 accumulator through a
# float scratch (the shape of llm.c's layernorm_backward kernels 6-8): the
# scratch is summed by float atomics, the output is copied from it.
SOURCE = r"""
#include <cuda_bf16.h>
__global__ void column_sums(__nv_bfloat16* out, float* scratch, const float* x, int rows, int cols) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x)
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            atomicAdd(&scratch[c], x[r * cols + c]);
}
__global__ void copy_out(__nv_bfloat16* out, const float* scratch, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < cols) out[c] = (__nv_bfloat16)scratch[c];
}
__global__ void plain_sums(float* out, const float* x, int rows, int cols) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= cols) return;
    float s = 0.0f;
    for (int r = 0; r < rows; r++) s += x[r * cols + c];
    out[c] = s;
}
"""


def test_float_atomics_are_found_in_the_port():
    p = port_cuda(SOURCE, filename="fa.cu")
    assert uses_float_atomics(p.metal, "column_sums")
    assert not uses_float_atomics(p.metal, "copy_out")
    assert not uses_float_atomics(p.metal, "plain_sums")


def test_float_atomic_sums_verify_with_a_note():
    rng = np.random.default_rng(3)
    rows, cols = 256, 64
    x = rng.uniform(-1, 1, rows * cols).astype(np.float32)
    p = port_cuda(SOURCE, filename="fa.cu")
    out = np.zeros(cols, np.uint16)
    res = p.verify("column_sums", out, np.zeros(cols, np.float32), x, rows, cols, grid=64, block=32)
    assert res.ok, str(res)
    assert not res.port_findings and not res.original_findings


@pytest.mark.parametrize("wrong", ["2.0f * x[r * cols + c]",
                                   "(r == 0 ? 0.0f : x[r * cols + c])"],  # one row: far more than the rounding
                         ids=["doubled", "one-row-lost"])
def test_a_wrong_float_atomic_port_still_fails(wrong):
    rng = np.random.default_rng(4)
    rows, cols = 256, 64
    x = rng.uniform(-1, 1, rows * cols).astype(np.float32)
    p = port_cuda(SOURCE, filename="fa.cu")
    for c in p.chunks:
        if "x[r * cols + c]" in c.text:
            c.text = c.text.replace("x[r * cols + c]", wrong, 1)
            break
    else:
        raise AssertionError("the port's add is not where the test expects it")
    res = p.verify("column_sums", np.zeros(cols, np.uint16), np.zeros(cols, np.float32), x, rows, cols,
                   grid=64, block=32)
    assert not res.ok and any(not b.match for b in res.buffers), str(res)


BF16_SUMS = r"""
#include <cuda_bf16.h>
__global__ void bf16_sums(__nv_bfloat16* out, const float* x, int rows, int cols) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x)
        for (int c = threadIdx.x; c < cols; c += blockDim.x)
            atomicAdd(&out[c], (__nv_bfloat16)x[r * cols + c]);
}
"""


def test_bfloat16_atomic_sums_verify_within_the_order_spread():
    # bfloat16 accumulators round every add (llm.c's layernorm_backward
    # kernel 3): the original itself moves by a few tenths between two group
    # orders. The port is held to a few times that spread or to the rounding
    # model's bound, whichever is smaller (which one depends on the orders
    # the two workers happened to take).
    rng = np.random.default_rng(5)
    rows, cols = 256, 64
    x = rng.uniform(-1, 1, rows * cols).astype(np.float32)
    p = port_cuda(BF16_SUMS, filename="bfa.cu")
    res = p.verify("bf16_sums", np.zeros(cols, np.uint16), x, rows, cols, grid=64, block=32)
    assert res.ok, str(res)
    notes = [n for n in res.notes if n.startswith("'out' matches within")]
    assert len(notes) <= 1, res.notes  # the default tolerance may hold on a lucky order
