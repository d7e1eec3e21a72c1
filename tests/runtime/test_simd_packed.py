"""simd_* / quad_* reductions over many full simdgroups: work-item loops hand
them to mk/simd.h's reduce_packed (a constant-width tree per segment), which
must give the pairwise tree's bits in every segment."""

import numpy as np
import pytest

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

kernel void sums(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                 device int* iout [[buffer(2)]], uint gid [[thread_position_in_grid]]) {
  const float v = a[gid];
  out[3 * gid + 0] = simd_sum(v);
  out[3 * gid + 1] = simd_max(v);
  out[3 * gid + 2] = quad_sum(v);
  iout[gid] = simd_sum(int(v * 1000.0f));
}
"""


def pairwise(x: np.ndarray, width: int, op) -> np.ndarray:
    """Each segment of `width` reduced as v[i] = op(v[i], v[i + h]) for
    h = width/2 .. 1, every lane of a segment getting v[0]."""
    v = x.reshape(-1, width).copy()
    h = width // 2
    while h:
        v[:, :h] = op(v[:, :h], v[:, h:2 * h])
        h //= 2
    return np.repeat(v[:, 0], width)


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


@pytest.mark.parametrize("group", [256, 1024])
def test_reductions_over_many_full_simdgroups_give_the_pairwise_trees_bits(lib, group):
    n = 64 * group
    a = np.random.default_rng(3).uniform(-1, 1, n).astype(np.float32)
    out = np.full(3 * n, np.nan, np.float32)
    iout = np.full(n, -7, np.int32)
    lib.sums(a, out, iout, threads=n, group_size=group)
    out = out.reshape(n, 3)
    np.testing.assert_array_equal(out[:, 0], pairwise(a, 32, np.add))
    np.testing.assert_array_equal(out[:, 1], pairwise(a, 32, np.maximum))
    np.testing.assert_array_equal(out[:, 2], pairwise(a, 4, np.add))
    ints = (a * np.float32(1000)).astype(np.int32)
    np.testing.assert_array_equal(iout, pairwise(ints, 32, np.add))
