"""Speed of metal_kernel.check(): against the unchecked run, and against
Oclgrind with --data-races on the same kernels, in one run.

Kernels (from bench_runtime.py, MSL and their OpenCL C twins): saxpy, the
256-wide tree reduction with a barrier per level, the 16x16-tiled matmul.
For each:

  unchecked        the ordinary dispatch (median of --repeat)
  checked          the dispatch inside `with metal_kernel.check():` (every tool,
                   4 schedules: the default), median of --repeat
  checked 1 sched  the instrumented run alone (schedules=1)
  Oclgrind         the OpenCL twin under Oclgrind with data-race detection
                   (OCLGRIND_DATA_RACES=1), in a child process, at a size it
                   finishes in reasonable time; its rate (elements or FLOP per
                   second) against the checked run's rate gives "x Oclgrind".

Outputs are poisoned before each run and checked against numpy on both sides.
Oclgrind comes from Debian (`apt-get install oclgrind`); pyopencl from PyPI
(`pip install -e '.[bench]'`). Without them the Oclgrind column reads n/a.

    python benchmarks/bench_check.py [--quick] [--repeat N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

import bench_runtime as B  # noqa: E402  (the kernels and their OpenCL twins)

import metal_kernel  # noqa: E402

# Sizes: ours, and Oclgrind's (it runs ~1e5 elements/s with race detection).
SIZES = {"saxpy": (1 << 24, 1 << 16), "reduce": (1 << 24, 1 << 16), "matmul": (512, 64)}
QUICK = {"saxpy": (1 << 20, 1 << 14), "reduce": (1 << 20, 1 << 14), "matmul": (128, 32)}

OCLGRIND_CHILD = r"""
import json, sys, time
import numpy as np
import pyopencl as cl
case, n, src = sys.argv[1], int(sys.argv[2]), open(sys.argv[3]).read()
plat = [p for p in cl.get_platforms() if "Oclgrind" in p.name][0]
ctx = cl.Context(plat.get_devices())
q = cl.CommandQueue(ctx)
prog = cl.Program(ctx, src).build()
rng = np.random.default_rng(0)
mf = cl.mem_flags
if case == "saxpy":
    x = rng.random(n, dtype=np.float32); y = rng.random(n, dtype=np.float32)
    out = np.full(n, np.nan, np.float32)
    bx, by = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x), cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=y)
    bo = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    k = cl.Kernel(prog, "saxpy"); k.set_args(bo, bx, by, np.float32(2.5))
    t = time.perf_counter(); cl.enqueue_nd_range_kernel(q, k, (n,), (256,)); q.finish(); dt = time.perf_counter() - t
    cl.enqueue_copy(q, out, bo); q.finish()
    ok = bool(np.allclose(out, np.float32(2.5) * x + y, rtol=1e-5))
    work = n
elif case == "reduce":
    x = rng.random(n, dtype=np.float32); out = np.full(n // 256, np.nan, np.float32)
    bx = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=x)
    bo = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    k = cl.Kernel(prog, "reduce_tree"); k.set_args(bx, bo)
    t = time.perf_counter(); cl.enqueue_nd_range_kernel(q, k, (n,), (256,)); q.finish(); dt = time.perf_counter() - t
    cl.enqueue_copy(q, out, bo); q.finish()
    ok = bool(np.allclose(out, x.reshape(-1, 256).astype(np.float64).sum(1), rtol=1e-4))
    work = n
else:
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32); b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    out = np.full((n, n), np.nan, np.float32)
    ba, bb = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a), cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
    bo = cl.Buffer(ctx, mf.READ_WRITE | mf.COPY_HOST_PTR, hostbuf=out)
    k = cl.Kernel(prog, "matmul_tiled"); k.set_args(ba, bb, bo, np.uint32(n))
    t = time.perf_counter(); cl.enqueue_nd_range_kernel(q, k, (n, n), (16, 16)); q.finish(); dt = time.perf_counter() - t
    cl.enqueue_copy(q, out, bo); q.finish()
    ok = bool(np.allclose(out, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3))
    work = 2 * n ** 3
print(json.dumps({"seconds": dt, "work": work, "ok": ok}))
"""


def oclgrind(case: str, n: int, timeout: float) -> dict:
    """The OpenCL twin under Oclgrind with data-race detection, in a child."""
    icd = "/usr/lib/oclgrind/liboclgrind-rt-icd.so"
    if not os.path.exists(icd):
        return {"error": "oclgrind not installed (apt-get install oclgrind)"}
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return {"error": "pyopencl not installed (pip install -e '.[bench]')"}
    with tempfile.TemporaryDirectory() as d:
        Path(d, "oclgrind.icd").write_text(icd + "\n")
        Path(d, "k.cl").write_text(B.OCL)
        Path(d, "child.py").write_text(OCLGRIND_CHILD)
        env = dict(os.environ, OCL_ICD_VENDORS=d, OCLGRIND_DATA_RACES="1", OCLGRIND_QUICK="0")
        try:
            p = subprocess.run([sys.executable, str(Path(d, "child.py")), case, str(n), str(Path(d, "k.cl"))],
                               capture_output=True, text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
        if p.returncode != 0 or not lines:
            return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1][:160]}
        r = json.loads(lines[-1])
        r["size"] = n
        r["rate"] = r["work"] / r["seconds"]
        return r


def _median_ms(fn, reset, repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        reset()
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times), "runs": len(times)}


def ours(case: str, n: int, lib, repeat: int) -> dict:
    rng = np.random.default_rng(0)
    if case == "saxpy":
        x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        out = np.empty(n, np.float32)
        run = lambda: lib.saxpy(out, x, y, 2.5, threads=n, group_size=256)  # noqa: E731
        want, got, work = (np.float32(2.5) * x + y), (lambda: out), n
        tol = dict(rtol=1e-5, atol=1e-6)
    elif case == "reduce":
        x = rng.random(n, dtype=np.float32)
        out = np.empty(n // 256, np.float32)
        run = lambda: lib.reduce_tree(x, out, threads=n, group_size=256)  # noqa: E731
        want, got, work = x.reshape(-1, 256).astype(np.float64).sum(1), (lambda: out), n
        tol = dict(rtol=1e-4, atol=1e-4)
    else:
        a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        out = np.empty((n, n), np.float32)
        run = lambda: lib.matmul_tiled(a, b, out, n, threads=[n, n], group_size=[16, 16],  # noqa: E731
                                       arg_casts={3: "int32"})
        want, got, work = a.astype(np.float64) @ b.astype(np.float64), (lambda: out), 2 * n ** 3
        tol = dict(rtol=1e-3, atol=1e-3)
    poison = lambda: out.fill(np.nan)  # noqa: E731

    def checked(schedules):
        def go():
            with metal_kernel.check(schedules=schedules) as report:
                run()
            if not report.ok:
                raise RuntimeError(f"{case}: the check reported errors on a correct kernel:\n{report}")
        return go

    res = {"size": n, "work": work}
    for name, fn in (("unchecked", run), ("checked", checked(4)), ("checked_1", checked(1))):
        fn()  # warm-up (compiles the checked build once)
        res[name] = _median_ms(fn, poison, repeat)
        if not np.allclose(got(), want, **tol):
            raise RuntimeError(f"{case} ({name}): wrong result")
    res["checked_over_unchecked"] = res["checked"]["median_ms"] / res["unchecked"]["median_ms"]
    res["checked_rate"] = work / (res["checked"]["median_ms"] / 1e3)
    return res


def machine() -> dict:
    info = {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()}
    try:
        text = Path("/proc/cpuinfo").read_text()
        info["cpu"] = next(ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name"))
        flags = next(ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags"))
        info["isa"] = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else "other"
    except (OSError, StopIteration):
        pass
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--cases", default="saxpy,reduce,matmul")
    ap.add_argument("--oclgrind-timeout", type=float, default=300)
    ap.add_argument("--json", help="write the results (and the machine) here")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else SIZES
    lib = metal_kernel.compile_shader(B.MSL)
    results = {"machine": machine(), "cases": {}}
    print(f"machine: {results['machine'].get('cpu', '?')}, {results['machine']['cpus']} cores, "
          f"load {results['machine']['load'][0]:.2f}")
    hdr = (f"{'case':8s} {'size':>9s} {'unchecked ms':>13s} {'checked ms':>11s} {'x unchecked':>12s} "
           f"{'1 sched ms':>11s} {'Oclgrind size':>14s} {'Oclgrind /s':>12s} {'ours /s':>10s} {'x Oclgrind':>11s}")
    print(hdr)
    for case in args.cases.split(","):
        n, n_ocl = sizes[case]
        r = ours(case, n, lib, args.repeat)
        o = oclgrind(case, n_ocl, args.oclgrind_timeout)
        r["oclgrind"] = o
        if "rate" in o:
            r["x_oclgrind"] = r["checked_rate"] / o["rate"]
        results["cases"][case] = r
        ocl = (f"{o['size']:14d} {o['rate']:12.3g}" if "rate" in o else f"{'n/a':>14s} {'':>12s}")
        xo = f"{r['x_oclgrind']:10.0f}x" if "x_oclgrind" in r else f"{o.get('error', 'n/a')[:40]}"
        print(f"{case:8s} {n:9d} {r['unchecked']['median_ms']:13.2f} {r['checked']['median_ms']:11.1f} "
              f"{r['checked_over_unchecked']:11.1f}x {r['checked_1']['median_ms']:11.1f} {ocl} "
              f"{r['checked_rate']:10.3g} {xo}")
    results["machine"]["load_end"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
