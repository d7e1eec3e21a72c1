"""exp, exp2, tanh, log and log2 for float (mk/vmath.h): inline code a thread
loop vectorises instead of libm's calls. Measured against the functions in
double over the whole float range: below 1 ulp of the exact value (Metal
allows 4 for exp and log, 5 for tanh), subnormal inputs and results,
overflow, NaN, infinities, negative inputs of log and signed zeros included,
and the same bits whether a thread ran in a vector body or alone."""

import numpy as np
import pytest

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void five(device const float* x [[buffer(0)]], device float* e [[buffer(1)]],
                 device float* e2 [[buffer(2)]], device float* th [[buffer(3)]],
                 device float* lg [[buffer(4)]], device float* lg2 [[buffer(5)]],
                 uint i [[thread_position_in_grid]]) {
  e[i] = exp(x[i]);
  e2[i] = exp2(x[i]);
  th[i] = tanh(x[i]);
  lg[i] = log(x[i]);
  lg2[i] = log2(x[i]);
}
kernel void fast_and_vector(device const float4* x [[buffer(0)]], device float4* e [[buffer(1)]],
                            device float4* lg [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  e[i] = fast::exp(x[i]);
  lg[i] = fast::log(x[i]);
}
"""

SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 88.72283, 88.7228394, 88.8, 89.0, 1e30,
           -87.33654, -103.97207, -103.972084, -104.0, -1e30, 127.99999, 128.0, -126.0, -149.0, -150.0,
           -151.0, 1e-30, -1e-30, 1.4e-45, -1.4e-45]


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def inputs() -> np.ndarray:
    """Every 997th float bit pattern (both signs, every exponent), densely
    the inputs of exp's subnormal results, those around tanh's switch from
    polynomial to exp at |x| = 1 and log's hardest (near sqrt(1/2) and
    sqrt(2), where its reduction turns, and around 1), and the special
    values."""
    spread = np.arange(0, 1 << 32, 997, dtype=np.uint64).astype(np.uint32).view(np.float32)
    subnormal_results = np.linspace(-104.0, -87.0, 200_001, dtype=np.float32)
    around_one = np.linspace(-2.0, 2.0, 400_001, dtype=np.float32)
    # every float in [0.70, 0.71] and in [1.40, 1.42]
    turns = [np.arange(np.float32(a).view(np.uint32), np.float32(b).view(np.uint32), dtype=np.uint32).view(np.float32)
             for a, b in ((0.70, 0.71), (1.40, 1.42))]
    return np.concatenate([spread, subnormal_results, around_one, *turns, np.array(SPECIAL, np.float32)])


def error_in_ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the float spacing at the exact value (the
    smallest subnormal below FLT_MIN), where the exact value is finite in float."""
    with np.errstate(over="ignore", invalid="ignore"):
        spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
        spacing = np.where(spacing == 0, 2.0 ** -149, spacing)
        err = np.abs(got.astype(np.float64) - exact) / spacing
        return np.where(np.isfinite(exact.astype(np.float32)) & np.isfinite(got), err, 0.0)


def run(lib, x, group_size=256):
    outs = [np.full_like(x, np.nan) for _ in range(len(FUNCTIONS))]
    lib.five(x, *outs, threads=len(x), group_size=group_size)
    return outs


def test_the_error_measure_sees_two_ulps():
    # The measure itself can fail: a result two float spacings off reads as ~2.
    x = np.array([0.5, 3.0, -20.0], np.float32)
    exact = np.exp(x.astype(np.float64))
    off = (exact.astype(np.float32).view(np.int32) + 2).view(np.float32)
    assert error_in_ulps(off, exact).min() > 1.5


FUNCTIONS = {"exp": np.exp, "exp2": np.exp2, "tanh": np.tanh, "log": np.log, "log2": np.log2}


@pytest.mark.parametrize("which", list(FUNCTIONS))
def test_below_one_ulp_over_the_float_range(lib, which):
    x = inputs()
    got = run(lib, x)[list(FUNCTIONS).index(which)]
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        exact = FUNCTIONS[which](x.astype(np.float64))
    err = error_in_ulps(got, exact)
    worst = int(np.argmax(err))
    assert err[worst] < 1.0, f"{which}({x[worst]!r}) = {got[worst]!r}, exact {exact[worst]!r}: {err[worst]:.3f} ulp"
    # Overflow, underflow to zero, saturation, NaN, the infinities and the
    # sign exactly as the IEEE functions.
    with np.errstate(over="ignore"):
        want = exact.astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(want))  # NaN in, and log of a negative number
    assert np.array_equal(np.isinf(got), np.isinf(want))
    assert np.array_equal(got == 0, want == 0)
    if which == "tanh":  # saturated from |x| = 10 on, never past 1
        assert (np.abs(got[np.abs(x) >= 10]) == 1).all() and not (np.abs(got) > 1).any()
    assert np.array_equal(np.signbit(got[~np.isnan(want)]), np.signbit(want[~np.isnan(want)]))


def test_same_bits_in_vector_bodies_and_alone(lib):
    # Groups of 7 leave threads to the scalar remainder that groups of 256
    # run in vector bodies, and groups of 1 run every thread alone.
    x = inputs()[::7].copy()
    ref = run(lib, x, 256)
    for gs in (7, 1):
        got = run(lib, x, gs)
        for a, b in zip(ref, got):
            assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), f"group_size={gs}"


def test_fast_exp_and_vectors_use_it_too(lib):
    x = np.random.default_rng(0).uniform(-90, 90, 4096).astype(np.float32)
    out, lg = np.full_like(x, np.nan), np.full_like(x, np.nan)
    lib.fast_and_vector(x, out, lg, threads=len(x) // 4, group_size=64)
    ref = run(lib, x)
    assert np.array_equal(out.view(np.uint32), ref[0].view(np.uint32))
    assert np.array_equal(lg.view(np.uint32), ref[3].view(np.uint32))
