"""What resume points in strided loops (runtime/workitem/loop_points.py) buy:
the benchmark's row softmax and layer norm (benchmarks/perf/kernels.py),
each built twice in one process, with points and with
METAL_KERNEL_LOOP_POINTS=0, at three row lengths over the same 8M floats:
256 columns (one iteration per thread in 256-thread groups: the points'
cost with nothing to gain), 1024 (the benchmark's shape) and 16384.

    python benchmarks/loop_points.py [--json OUT] [--repeat N]
    METAL_KERNEL_CXXFLAGS=-march=znver3 python benchmarks/loop_points.py   # built for AVX2

The two builds run alternately; outputs are poisoned before the first run
and both checked against numpy. Prints a table; `--json` writes every run
(benchmarks/perf/timing.py's summary, in seconds) and the machine. Never
part of the tests: it measures time.
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

ELEMENTS = 1 << 23
COLUMNS = (256, 1024, 16384)
GROUP = 256


def softmax_calls(lib, rows: int, cols: int):
    x = data.aligned(data.rows_input(rows, cols))
    out = data.aligned(np.full_like(x, np.nan))
    call = (lambda: lib.softmax_rows(x, out, cols, threadgroups=[rows], group_size=[GROUP], arg_casts={2: "int32"}))
    return call, lambda: np.testing.assert_allclose(out, data.softmax_ref(x), rtol=1e-4, atol=1e-7)


def layer_norm_calls(lib, rows: int, cols: int):
    d = {k: data.aligned(v) if isinstance(v, np.ndarray) else v for k, v in data.layer_norm_data(rows, cols).items()}
    out = data.aligned(np.full_like(d["x"], np.nan))
    call = (lambda: lib.layer_norm(d["x"], out, d["w"], d["b"], cols, d["eps"], threadgroups=[rows],
                                   group_size=[GROUP], arg_casts={4: "int32", 5: "float32"}))
    return call, lambda: np.testing.assert_allclose(out, data.layer_norm_ref(d), rtol=1e-4, atol=1e-4)


CASES = {"row softmax": ("softmax", softmax_calls), "layer norm": ("layernorm", layer_norm_calls)}


def measure(repeat: int) -> list[dict]:
    rows_out = []
    for title, (which, make) in CASES.items():
        libs = standalone.builds(kernels.LIBRARIES[which], "METAL_KERNEL_LOOP_POINTS",
                                 {"points": "1", "no points": "0"})
        for cols in COLUMNS:
            rows = ELEMENTS // cols
            calls = {}
            for label, lib in libs.items():
                call, check = make(lib, rows, cols)
                call()  # warm-up and the store proof
                check()
                calls[label] = call
            times = alternate(calls, repeat)
            for label in calls:
                rows_out.append({"kernel": title, "columns": cols, "rows": rows, "build": label,
                                 **summary(times[label])})
    return rows_out


def table(rows: list[dict]) -> str:
    base = {(r["kernel"], r["columns"]): r["median_s"] for r in rows if r["build"] == "no points"}
    lines = ["| kernel | rows x columns | build | median ms | fastest ms | speed-up |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['rows']}x{r['columns']} | {r['build']} | {1e3 * r['median_s']:.2f} | "
                     f"{1e3 * r['min_s']:.2f} | {base[(r['kernel'], r['columns'])] / r['median_s']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    # METAL_KERNEL_CXXFLAGS=-march=znver3 measures the AVX2 class on an AVX-512 machine.
    extra = {"cxxflags": os.environ.get("METAL_KERNEL_CXXFLAGS", ""), "group_size": GROUP}
    return standalone.main(__doc__, measure, table, 20, "runs per build and shape", extra=extra, argv=argv)


if __name__ == "__main__":
    sys.exit(main())
