"""Property-based checks of numerics (hypothesis): conversions and integer
arithmetic agree with torch bit for bit on arbitrary inputs."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void round_trip(device const float* x [[buffer(0)]], device half* h [[buffer(1)]],
                       device bfloat* b [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  h[i] = half(x[i]);
  b[i] = bfloat(x[i]);
}
kernel void int_arith(device const int* a [[buffer(0)]], device const int* b [[buffer(1)]],
                      device int* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  int x = a[i], y = b[i];
  out[4 * i + 0] = x + y;          // wraps, as on the GPU
  out[4 * i + 1] = x * y;
  out[4 * i + 2] = (y != 0 && !(x == INT_MIN && y == -1)) ? x / y : 0;  // avoid the trapping cases
  out[4 * i + 3] = int(uint(x) >> (uint(y) & 31));
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


floats = arrays(np.float32, st.integers(1, 64),
                elements=st.floats(width=32, allow_nan=False, allow_infinity=True))


@settings(max_examples=40, deadline=None)
@given(x=floats)
def test_half_and_bfloat_conversion_match_torch(lib, x):
    t = torch.from_numpy(x.copy())
    h = torch.zeros(t.numel(), dtype=torch.float16)
    b = torch.zeros(t.numel(), dtype=torch.bfloat16)
    lib.round_trip(t, h, b, threads=t.numel())
    assert torch.equal(h.view(torch.int16), t.half().view(torch.int16))
    assert torch.equal(b.view(torch.int16), t.bfloat16().view(torch.int16))


ints = arrays(np.int32, 16, elements=st.integers(-(2**31), 2**31 - 1))


@settings(max_examples=40, deadline=None)
@given(a=ints, b=ints)
def test_integer_arithmetic_wraps_like_two_complement(lib, a, b):
    out = torch.zeros(16 * 4, dtype=torch.int32)
    lib.int_arith(torch.from_numpy(a), torch.from_numpy(b), out, threads=16)
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    wrap = lambda v: ((v + 2**31) % 2**32 - 2**31).astype(np.int32)  # noqa: E731
    r = out.reshape(16, 4).numpy()
    np.testing.assert_array_equal(r[:, 0], wrap(a64 + b64))
    np.testing.assert_array_equal(r[:, 1], wrap(a64 * b64))
    safe = (b != 0) & ~((a == -(2**31)) & (b == -1))
    nz = np.where(b64 == 0, 1, b64)
    q = np.abs(a64) // np.abs(nz) * np.sign(a64) * np.sign(nz)  # C truncating division
    np.testing.assert_array_equal(r[safe, 2], wrap(q)[safe])
    np.testing.assert_array_equal(r[:, 3], (a.view(np.uint32) >> (b.view(np.uint32) & 31)).view(np.int32))
