#!/usr/bin/env python3
"""metal-kernel's runtime against PoCL, PyTorch and the machine's limits.

Each kernel runs in metal-kernel (MSL) and, where it has one, its OpenCL C
twin in PoCL at PoCL's best settings (local sizes NULL, 256, 1024 and 4096
where the kernel leaves them free) and PyTorch's CPU operator, in one
process on the same data, the sides interleaved run by run; every run's
output is poisoned before and checked after. The machine's limits (STREAM
triad / copy / read bandwidth, an FMA loop, OpenBLAS sgemm) are measured in
the same run, before and after the kernels, with as many threads as the
runtime's pool, and each kernel is reported as a fraction of its limit.
See benchmarks/README.md.

    python benchmarks/bench_runtime.py --quick               # small sizes
    python benchmarks/bench_runtime.py --json results.json   # every figure
    python benchmarks/bench_runtime.py --isa avx2            # AVX2 machine class
    python benchmarks/bench_runtime.py --show results.json   # the tables of a saved run
    python benchmarks/bench_runtime.py --doc                 # docs/performance.md from results/
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# numpy's BLAS threads busy-wait after every call (the references use one);
# the contenders that keep threads run in benchmarks/perf/worker.py.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE / "perf"))
# The checkout this script is in, before any installed metal_kernel: an
# editable install of another checkout would otherwise be what is measured.
sys.path.insert(1, str(REPO))
import machine  # noqa: E402
import report  # noqa: E402
from kernels import MSL, OCL  # noqa: E402,F401  (benchmarks/bench_check.py reads them)

import metal_kernel  # noqa: F401


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per side (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    ap.add_argument("--cases", help="comma-separated case keys or letters (default: all); "
                                    "add 'compile' / 'memory' for those reports")
    ap.add_argument("--isa", choices=["native", "avx2"], default="native",
                    help="machine class: this CPU's own, or everything built for AVX2 (Zen 3)")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds of timed runs per side; fewer runs (min 3) if slower (default 30)")
    ap.add_argument("--json", metavar="OUT", help="write every figure to OUT")
    ap.add_argument("--show", metavar="FILE", help="print the tables of a saved run and exit")
    ap.add_argument("--doc", action="store_true",
                    help="regenerate docs/performance.md's tables from benchmarks/results/*.json and exit")
    ap.add_argument("--wait-quiet", type=float, metavar="LOAD",
                    help="first wait (up to 30 minutes) until the 1-minute load average is below LOAD")
    ap.add_argument("--first-use", action="store_true", help="also time a compile with empty zig caches (~1 min)")
    ap.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    return ap.parse_args(argv)


def reexec_for_class(args, argv) -> int | None:
    """Runs the benchmark again in a process built for --isa's class (numpy
    and torch read their instruction-set variables once, at import)."""
    if args.isa == "native" or os.environ.get(machine.CLASS_ENV) == args.isa:
        return None
    env = dict(os.environ, **machine.class_environment(args.isa))
    return subprocess.call([sys.executable, __file__, *argv], env=env)


def wait_quiet(load: float, limit_s: float):
    """Waits until other processes leave the cores alone (the load is still
    recorded with the results)."""
    t = time.perf_counter()
    while (now := os.getloadavg()[0]) >= load and time.perf_counter() - t < limit_s:
        log(f"load {now:.2f} >= {load}: waiting")
        time.sleep(15)
    log(f"starting at load {os.getloadavg()[0]:.2f} after {time.perf_counter() - t:.0f} s")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.show:
        report.print_run(json.loads(Path(args.show).read_text()))
        return 0
    if args.doc:
        changed = report.write_docs(REPO)
        print("updated: " + ", ".join(changed) if changed else "docs already match benchmarks/results")
        return 0
    rc = reexec_for_class(args, argv)
    if rc is not None:
        return rc
    if args.wait_quiet is not None:
        wait_quiet(args.wait_quiet, 30 * 60)
    import runner

    doc = runner.run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
        log(f"wrote {args.json}")
    report.print_run(doc)
    bad = [c["key"] for c in doc["cases"] if c["sides"].get("ours", {}).get("status") in ("wrong", "error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
