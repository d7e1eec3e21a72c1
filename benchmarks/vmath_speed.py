"""What inline exp, tanh and log (mk/vmath.h) buy: y = f(x) over 16M floats
with the runtime's f, which a thread loop vectorises, against the same kernel
calling libm's expf / tanhf / logf (clang's builtins, which the runtime used before),
and against torch's CPU operator writing into a preallocated tensor (`out=`,
as the kernels do), plus the tanh form of GELU.

    python benchmarks/vmath_speed.py [--json OUT] [--repeat N]

The contenders run alternately in one process; inputs are uniform in
[-5, 5) (log: their absolute values), outputs poisoned before the first run and checked against numpy
(float64) after it. Prints a table; `--json` writes every run
(benchmarks/perf/timing.py's summary, in seconds) and the machine. Never part
of the tests: it measures time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "perf"))

import standalone
from timing import alternate, summary

import metal_kernel

N = 1 << 24

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void exp_inline(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) { y[i] = exp(x[i]); }
kernel void exp_libm(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) { y[i] = __builtin_expf(x[i]); }
kernel void tanh_inline(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) { y[i] = tanh(x[i]); }
kernel void tanh_libm(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) { y[i] = __builtin_tanhf(x[i]); }
kernel void log_inline(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) { y[i] = log(x[i]); }
kernel void log_libm(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) { y[i] = __builtin_logf(x[i]); }
kernel void gelu_tanh(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  const float v = x[i];
  y[i] = 0.5f * v * (1.0f + tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
}
"""


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))


def measure(repeat: int) -> list[dict]:
    import torch

    lib = metal_kernel.compile_shader(SOURCE)
    signed = np.random.default_rng(0).uniform(-5, 5, N).astype(np.float32)
    positive = np.abs(signed)
    yt = torch.empty(N, dtype=torch.float32)
    # (function, its input, reference, the kernels with their labels, torch's operator)
    functions = (
        ("exp", signed, np.exp, (("exp_inline", "inline (vectorised)"), ("exp_libm", "libm calls")),
         lambda t: torch.exp(t, out=yt)),
        ("tanh", signed, np.tanh, (("tanh_inline", "inline (vectorised)"), ("tanh_libm", "libm calls")),
         lambda t: torch.tanh(t, out=yt)),
        ("log", positive, np.log, (("log_inline", "inline (vectorised)"), ("log_libm", "libm calls")),
         lambda t: torch.log(t, out=yt)),
        ("gelu (tanh form)", signed, gelu_tanh, (("gelu_tanh", "inline (vectorised)"),),
         lambda t: torch.ops.aten.gelu.out(t, approximate="tanh", out=yt)),
    )
    contenders = []  # (function, contender, call)
    for fn, x, ref, kernels, torch_op in functions:
        want = ref(x.astype(np.float64))
        xt = torch.from_numpy(x)
        for name, label in kernels:
            out = np.full_like(x, np.nan)
            k = getattr(lib, name)
            call = (lambda k=k, x=x, out=out: k(x, out, threads=N, group_size=256))
            call()
            np.testing.assert_allclose(out, want, rtol=2e-6, atol=1e-6, err_msg=name)
            contenders.append((fn, f"metal-kernel, {label}", call))
        torch_op(xt)
        np.testing.assert_allclose(yt.numpy(), want, rtol=2e-6, atol=1e-6, err_msg=f"torch {fn}")
        contenders.append((fn, "torch (out=)", lambda op=torch_op, xt=xt: op(xt)))
    times = alternate({(fn, who): call for fn, who, call in contenders}, repeat)
    return [{"function": fn, "contender": who, "elements": N, **summary(times[(fn, who)])}
            for fn, who, _ in contenders]


def table(rows: list[dict]) -> str:
    lines = ["| function | contender | median ms | fastest ms | ns per element (median) |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['function']} | {r['contender']} | {1e3 * r['median_s']:.2f} | {1e3 * r['min_s']:.2f} | "
                     f"{1e9 * r['median_s'] / r['elements']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    return standalone.main(__doc__, measure, table, 20, "runs per contender", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
