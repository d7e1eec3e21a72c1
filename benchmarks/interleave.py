"""What interleaving the loop functions' floating-point chains
(runtime/workitem/interleave.py) buys: the benchmark's 16x16-tiled matmul
(512³), row softmax and layer norm (8M floats, 1024 columns; kernels from
benchmarks/perf/kernels.py), each built twice in one process, with the pass
and with METAL_KERNEL_INTERLEAVE=0.

    python benchmarks/interleave.py [--json OUT] [--repeat N]
    METAL_KERNEL_CXXFLAGS=-march=znver3 python benchmarks/interleave.py   # built for AVX2

The two builds run alternately; outputs are poisoned before the first run,
checked against numpy, and the two builds' outputs compared bit for bit.
Prints a table; `--json` writes every run (benchmarks/perf/timing.py's
summary, in seconds) and the machine. Never part of the tests: it measures
time.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "perf"))

import data  # benchmarks/perf
import kernels
import standalone
from timing import alternate, summary

N = 512  # the matmul's size
COLUMNS = 1024
ROWS = (1 << 23) // COLUMNS
GROUP = 256
BUILDS = (("interleaved", "1"), ("LLVM's order", "0"))


def matmul(lib):
    rng = np.random.default_rng(0)
    a = data.aligned(rng.uniform(-1, 1, (N, N)).astype(np.float32))
    b = data.aligned(rng.uniform(-1, 1, (N, N)).astype(np.float32))
    out = data.aligned(np.full((N, N), np.nan, np.float32))
    call = (lambda: lib.matmul_tiled(a, b, out, N, threads=[N, N], group_size=[16, 16], arg_casts={3: "int32"}))
    ref = a.astype(np.float64) @ b
    return call, out, lambda: np.testing.assert_allclose(out, ref, rtol=1e-4, atol=2e-4 * np.sqrt(N))


def softmax(lib):
    x = data.aligned(data.rows_input(ROWS, COLUMNS))
    out = data.aligned(np.full_like(x, np.nan))
    call = (lambda: lib.softmax_rows(x, out, COLUMNS, threadgroups=[ROWS], group_size=[GROUP],
                                     arg_casts={2: "int32"}))
    return call, out, lambda: np.testing.assert_allclose(out, data.softmax_ref(x), rtol=1e-4, atol=1e-7)


def layer_norm(lib):
    d = {k: data.aligned(v) if isinstance(v, np.ndarray) else v
         for k, v in data.layer_norm_data(ROWS, COLUMNS).items()}
    out = data.aligned(np.full_like(d["x"], np.nan))
    call = (lambda: lib.layer_norm(d["x"], out, d["w"], d["b"], COLUMNS, d["eps"], threadgroups=[ROWS],
                                   group_size=[GROUP], arg_casts={4: "int32", 5: "float32"}))
    return call, out, lambda: np.testing.assert_allclose(out, data.layer_norm_ref(d), rtol=1e-4, atol=1e-4)


CASES = {"16x16-tiled matmul 512^3": ("main", matmul), f"row softmax {ROWS}x{COLUMNS}": ("softmax", softmax),
         f"layer norm {ROWS}x{COLUMNS}": ("layernorm", layer_norm)}


def measure(repeat: int) -> list[dict]:
    rows = []
    for title, (which, make) in CASES.items():
        libs = standalone.builds(kernels.LIBRARIES[which], "METAL_KERNEL_INTERLEAVE", dict(BUILDS))
        calls, outs = {}, []
        for label, lib in libs.items():
            call, out, check = make(lib)
            call()  # warm-up and the store proof
            check()
            calls[label] = call
            outs.append(out)
        assert np.array_equal(outs[0].view(np.uint32), outs[1].view(np.uint32)), f"{title}: builds differ"
        times = alternate(calls, repeat)
        for label in calls:
            rows.append({"kernel": title, "build": label, **summary(times[label])})
    return rows


def table(rows: list[dict]) -> str:
    base = {r["kernel"]: r["median_s"] for r in rows if r["build"] == BUILDS[1][0]}
    lines = ["| kernel | build | median ms | fastest ms | speed-up |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['build']} | {1e3 * r['median_s']:.2f} | {1e3 * r['min_s']:.2f} | "
                     f"{base[r['kernel']] / r['median_s']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    # METAL_KERNEL_CXXFLAGS=-march=znver3 measures the AVX2 class on an AVX-512 machine.
    extra = {"cxxflags": os.environ.get("METAL_KERNEL_CXXFLAGS", "")}
    return standalone.main(__doc__, measure, table, 30, "runs per build and kernel", extra=extra, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
