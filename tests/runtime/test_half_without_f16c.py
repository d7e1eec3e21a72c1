"""Kernels built for a CPU without F16C (METAL_KERNEL_MARCH=x86-64-v2): clang
calls __truncsfhf2 / __extendhfsf2 for every half conversion there, which
the kernel libraries define themselves (mk/soft_float.h; they link without
compiler-rt). Before they did, such a library did not load at all. The
conversions are checked bit for bit against numpy's (round to nearest even)."""

import numpy as np
import pytest

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void to_half(device const float* x [[buffer(0)]], device half* h [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) { h[i] = half(x[i]); }
kernel void to_float(device const half* h [[buffer(0)]], device float* y [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) { y[i] = float(h[i]); }
kernel void half_math(device const half* h [[buffer(0)]], device half* y [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) { y[i] = h[i] * half(2) + half(1); }
"""


@pytest.fixture(scope="module")
def lib():
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        flags = ""
    if " sse4_1" not in flags:
        pytest.skip("needs an x86-64 CPU with SSE4.1 (x86-64-v2)")
    mp = pytest.MonkeyPatch()
    mp.setenv("METAL_KERNEL_MARCH", "x86-64-v2")  # clang's spelling; toolchain.march() respells it for zig
    try:
        return metal_kernel.compile_shader(SOURCE)
    finally:
        mp.undo()


def test_float_to_half_rounds_as_numpy(lib):
    bits = np.arange(0, 1 << 32, 4099, dtype=np.uint64).astype(np.uint32)
    edges = [65504.0, 65519.99, 65520.0, 65520.01, 6.1035156e-05, 6.1035152e-05, 5.9604645e-08,
             2.9802322e-08, 2.9802326e-08, 8.940697e-08, -0.0, 0.0, np.inf, -np.inf, np.nan]
    x = np.concatenate([bits.view(np.float32), np.array(edges, np.float32)])
    h = np.full(len(x), np.nan, np.float16)
    lib.to_half(x, h, threads=len(x), group_size=64)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
    nan = np.isnan(x)
    assert np.array_equal(h.view(np.uint16)[~nan], want.view(np.uint16)[~nan])
    assert np.isnan(h[nan]).all()


def test_every_half_to_float_exactly(lib):
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    y = np.full(len(every), np.nan, np.float32)
    lib.to_float(every, y, threads=len(every), group_size=64)
    want = every.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(y.view(np.uint32)[~nan], want.view(np.uint32)[~nan])
    assert np.isnan(y[nan]).all()


def test_half_arithmetic(lib):
    h = np.linspace(-100, 100, 4097).astype(np.float16)
    y = np.full_like(h, np.nan)
    lib.half_math(h, y, threads=len(h), group_size=64)
    assert np.array_equal(y, (h * np.float16(2)) + np.float16(1))
