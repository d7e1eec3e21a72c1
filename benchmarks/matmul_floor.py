"""Where the 16x16-tiled matmul's time goes: the full kernel against three
cut-down copies, at two sizes:

- one FMA per tile: the inner loop cut to one iteration (the tile loads,
  barriers, region calls and bookkeeping stay);
- no device loads: the tiles filled from the thread's index instead of A
  and B (the FMAs, barriers and bookkeeping stay);
- neither: both cuts, what is left is the work-item machinery itself (the
  two region calls per tile, the per-thread state, the driver).

    python benchmarks/matmul_floor.py [--json OUT] [--repeat N]

The variants run alternately in one process, so that load which comes and
goes on a shared machine hits both alike; outputs are poisoned before the
first run and the full kernel is checked against numpy. The time per
group-tile (one group's work for one 16-wide slice of k) tells whether the
floor waits on memory: the 256³ matrices fit this CPU's L2, the 512³ ones
do not. Prints a table; `--json` writes every run (benchmarks/perf/
timing.py's summary, in seconds) and the machine. Never part of the tests:
it measures time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent / "perf"))

import kernels  # benchmarks/perf
import standalone
from timing import summary

import metal_kernel

SIZES = (256, 512)


def sources() -> dict[str, str]:
    """The benchmark's own matmul_tiled, and its cut-down copies."""
    body = kernels.MSL[kernels.MSL.index("kernel void matmul_tiled"):kernels.MSL.index("// simd_sum within")]
    head = "#include <metal_stdlib>\nusing namespace metal;\n"
    cuts = {
        "one FMA": [("for (uint k = 0; k < 16; ++k) acc +=", "for (uint k = 0; k < 1; ++k) acc +=")],
        "no loads": [("As[lid.y][lid.x] = A[row * N + t + lid.x];", "As[lid.y][lid.x] = float(lid.x + t);"),
                     ("Bs[lid.y][lid.x] = B[(t + lid.y) * N + col];", "Bs[lid.y][lid.x] = float(lid.y + row);")],
    }

    def cut(*names: str) -> str:
        text = body
        for name in names:
            for old, new in cuts[name]:
                assert old in text, "matmul_tiled changed: update matmul_floor.py"
                text = text.replace(old, new)
        return head + text

    return {"full": cut(), "one FMA per tile": cut("one FMA"), "no device loads": cut("no loads"),
            "neither": cut("one FMA", "no loads")}


def measure(repeat: int) -> list[dict]:
    libs = {name: metal_kernel.compile_shader(src) for name, src in sources().items()}
    rows = []
    rng = np.random.default_rng(0)
    for n in SIZES:
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        calls, times = {}, {}
        for name, lib in libs.items():
            out = np.full((n, n), np.nan, np.float32)
            k = lib.matmul_tiled
            calls[name] = (lambda k=k, a=a, b=b, out=out, n=n: k(a, b, out, n, threads=[n, n], group_size=[16, 16],
                                                                  arg_casts={3: "int32"}))
            calls[name]()  # warm-up (and the store proof)
            assert not np.isnan(out).any(), f"{name}: unwritten outputs"
            if name == "full":
                np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-4, atol=2e-4 * np.sqrt(n))
            times[name] = []
        for i in range(repeat):
            for name in (list(calls) if i % 2 == 0 else list(calls)[::-1]):
                t0 = time.perf_counter()
                calls[name]()
                times[name].append(time.perf_counter() - t0)
        group_tiles = (n // 16) ** 2 * (n // 16)
        for name in calls:
            s = summary(times[name])
            rows.append({"n": n, "variant": name, "group_tiles": group_tiles, **s})
    return rows


def table(rows: list[dict]) -> str:
    full = {r["n"]: r["median_s"] for r in rows if r["variant"] == "full"}
    lines = ["| size | variant | median ms | fastest ms | ns per group-tile (median) | of the full kernel |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n']}³ | {r['variant']} | {1e3 * r['median_s']:.2f} | {1e3 * r['min_s']:.2f} | "
                     f"{1e9 * r['median_s'] / r['group_tiles']:.0f} | {r['median_s'] / full[r['n']]:.0%} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    return standalone.main(__doc__, measure, table, 60, "runs per variant and size", argv=argv)


if __name__ == "__main__":
    sys.exit(main())
