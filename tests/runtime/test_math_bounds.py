"""METAL_KERNEL_MATH=bounds / compile_shader(math="bounds"): math results drawn
within the accuracy the MSL specification allows (runtime/math_bounds.py),
so kernels that rely on more precision than a GPU gives fail here too."""

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel.runtime import math_bounds

FUNCS = ["exp", "log", "sin", "cos", "tan", "tanh", "atan", "pow", "fast::exp", "fast::sin", "fast::log",
         "fast::rsqrt", "fast::divide"]
SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void functions(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                      device half* h [[buffer(2)]], device bfloat* b [[buffer(3)]],
                      uint i [[thread_position_in_grid]], uint n [[threads_per_grid]]) {
  float x = in[i], p = fabs(x) + 0.25f;
  out[i + 0 * n] = exp(x);
  out[i + 1 * n] = log(p);
  out[i + 2 * n] = sin(x);
  out[i + 3 * n] = cos(x);
  out[i + 4 * n] = tan(x);
  out[i + 5 * n] = tanh(x);
  out[i + 6 * n] = atan(x);
  out[i + 7 * n] = pow(p, 1.7f);
  out[i + 8 * n] = fast::exp(x);
  out[i + 9 * n] = fast::sin(x);
  out[i + 10 * n] = fast::log(p);
  out[i + 11 * n] = fast::rsqrt(p);
  out[i + 12 * n] = fast::divide(x, p);
  h[i] = exp(half(x));
  h[i + n] = sin(half(x));
  b[i] = bfloat(x) * bfloat(3);
}
"""
N = 256


def run(math):
    lib = metal_kernel.compile_shader(SOURCE, math=math)
    x = torch.linspace(-3, 3, N)
    out = torch.full((len(FUNCS) * N,), float("nan"))
    h = torch.full((2 * N,), float("nan"), dtype=torch.half)
    b = torch.full((N,), float("nan"), dtype=torch.bfloat16)
    lib.functions(out, x, h, b, threads=N)
    return x, out.view(len(FUNCS), N), h.view(2, N), b


def spec_ulp(v: np.ndarray, dtype) -> np.ndarray:
    """ulp(v) as section 8.4 defines it: the spacing of the two values around v."""
    a = np.abs(v).astype(dtype)
    a = np.where(a.astype(np.float64) > np.abs(v), np.nextafter(a, dtype(0)), a)
    return np.nextafter(a, dtype(np.inf)).astype(np.float64) - a.astype(np.float64)


def references(x: np.ndarray) -> dict[str, np.ndarray]:
    p = (np.abs(x.astype(np.float32)) + np.float32(0.25)).astype(np.float64)  # as the kernel rounds it
    return {"exp": np.exp(x), "log": np.log(p), "sin": np.sin(x), "cos": np.cos(x), "tan": np.tan(x),
            "tanh": np.tanh(x), "atan": np.arctan(x), "pow": p ** float(np.float32(1.7)), "fast::exp": np.exp(x),
            "fast::sin": np.sin(x), "fast::log": np.log(p), "fast::rsqrt": 1 / np.sqrt(p), "fast::divide": x / p}


def allowed(name: str, x: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """The largest error the specification's tables allow, per element."""
    fast = name.startswith("fast::")
    bound = math_bounds.TABLE[name.removeprefix("fast::")][1 if fast else 0]
    u = spec_ulp(ref, np.float32)
    if bound.kind == "ulp":
        return bound.ulps * u
    if bound.kind == "exp":
        return (3 + np.floor(np.abs(2 * x))) * u
    if bound.kind == "abs":
        p = np.abs(x) + 0.25 if "log" in name else x
        inside = (p >= bound.lo) & (p <= bound.hi)
        return np.where(inside | (bound.ulps == 0), bound.absolute, bound.ulps * u)
    return 0.5 * u


def test_bounds_mode_results_differ_from_exact_but_stay_within_the_specified_bounds():
    x, exact, exact_h, exact_b = run("exact")
    _, bounded, bounded_h, bounded_b = run("bounds")
    xd = x.double().numpy()
    refs = references(xd)
    for k, name in enumerate(FUNCS):
        err = np.abs(bounded[k].double().numpy() - refs[name])
        ok = err <= allowed(name, xd, refs[name]) * (1 + 1e-9)
        assert np.all(ok), f"{name}({xd[~ok][:3]}) off by {err[~ok][:3]}"
        assert (bounded[k] != exact[k]).sum() > N // 8, f"{name} is not perturbed"
    xh = x.half().double().numpy()
    for row, ref in ((0, np.exp(xh)), (1, np.sin(xh))):  # Table 8.3: 1 ulp
        err = np.abs(bounded_h[row].double().numpy() - ref)
        assert np.all(err <= spec_ulp(ref, np.float16) * (1 + 1e-9))
        assert (bounded_h[row] != exact_h[row]).sum() > N // 8
    # bfloat arithmetic: correctly rounded to nearest even or toward zero
    f = (x.bfloat16().float() * 3).numpy()  # exact in float
    rne = torch.from_numpy(f).bfloat16()
    rtz = torch.from_numpy((f.view(np.uint32) & 0xFFFF0000).view(np.float32)).bfloat16()
    assert torch.all((bounded_b == rne) | (bounded_b == rtz))
    assert torch.equal(exact_b, rne) and (bounded_b != rne).sum() > 0


def test_bounds_mode_is_seeded_and_reproducible():
    _, a, ah, _ = run("bounds:3")
    _, b, bh, _ = run("bounds:3")
    _, c, _, _ = run("bounds:4")
    assert torch.equal(a, b) and torch.equal(ah, bh)
    assert not torch.equal(a, c)


def test_a_kernel_relying_on_more_precision_than_fast_math_gives_fails_in_bounds_mode(monkeypatch):
    src = r"""#include <metal_stdlib>
kernel void small_sin(device float* out [[buffer(0)]], device const float* x [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) { out[i] = metal::fast::sin(x[i]); }"""
    x = torch.linspace(1e-3, 1e-2, 64)
    out = torch.full((64,), float("nan"))
    metal_kernel.compile_shader(src).small_sin(out, x)
    torch.testing.assert_close(out, torch.sin(x), rtol=1e-5, atol=0)  # exact mode hides it
    monkeypatch.setenv("METAL_KERNEL_MATH", "bounds")
    out = torch.full((64,), float("nan"))
    metal_kernel.compile_shader(src).small_sin(out, x)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(out, torch.sin(x), rtol=1e-5, atol=0)


@pytest.mark.parametrize("value", ["bound", "bounds:x", "bounds:-1", "fast"])
def test_unknown_math_modes_are_refused(value, monkeypatch):
    with pytest.raises(ValueError, match="exact.*bounds"):
        metal_kernel.compile_shader("kernel void k(device float* o [[buffer(0)]]) {}", math=value)
    monkeypatch.setenv("METAL_KERNEL_MATH", value)
    with pytest.raises(ValueError, match="METAL_KERNEL_MATH"):
        metal_kernel.compile_shader("kernel void k(device float* o [[buffer(0)]]) {}")


def test_math_bounds_header_and_doc_are_generated_from_the_table():
    assert math_bounds.INCLUDE.read_text() == math_bounds.header()
    assert math_bounds.DOC.read_text() == math_bounds.markdown()
