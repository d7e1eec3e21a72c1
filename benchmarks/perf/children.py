"""Measurements in fresh processes: compile times (empty cache, a new
kernel, the cache hit) and the peak memory of large dispatches."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kernels import C10_KERNEL, MSL, PLAIN_KERNEL
from timing import first_line

REPO = Path(__file__).resolve().parents[2]


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def _child_env(cache_dir: str | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    if cache_dir:
        env["METAL_KERNEL_CACHE_DIR"] = cache_dir
    return env


COMPILE_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import metal_kernel
t1 = time.perf_counter()
src = open(sys.argv[1]).read()
try:
    lib = metal_kernel.compile_shader(src)
    t2 = time.perf_counter()
    print(json.dumps({"import_s": t1 - t0, "compile_s": t2 - t1, "kernels": dir(lib)}))
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
"""


def _compile_in_child(src: str, cache_dir: str, extra_env: dict | None = None) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".metal", delete=False) as f:
        f.write(src)
        path = f.name
    try:
        t = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", COMPILE_CHILD, path],
                           env={**_child_env(cache_dir), **(extra_env or {})},
                           capture_output=True, text=True, timeout=600)
        wall = time.perf_counter() - t
    finally:
        os.unlink(path)
    if p.returncode != 0 or not p.stdout.strip():
        return {"error": (p.stderr.strip() or "no output")[-400:]}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["process_wall_s"] = wall
    return out


def compile_report(args) -> dict:
    import shutil

    res = {}
    tmp = tempfile.mkdtemp(prefix="mk-bench-cache-")
    try:
        src, label = C10_KERNEL, "kernel including <c10/metal/utils.h>"
        cold = _compile_in_child(src, tmp)
        if "error" in cold:
            res["c10_error"] = first_line(cold["error"].replace("MetalCompileError: ", ""), 300)
            log(f"  c10/metal/utils.h kernel does not compile: {res['c10_error']}")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp = tempfile.mkdtemp(prefix="mk-bench-cache-")
            src, label = PLAIN_KERNEL, "plain kernel (c10 kernel did not compile)"
            cold = _compile_in_child(src, tmp)
        res["kernel"] = label
        res["first_compile_empty_cache"] = cold
        # A new kernel when the runtime library is already built: the same
        # source plus a declaration, so pass 1's output (the object key) differs.
        nonce = f"\nconstant int mk_bench_nonce_{os.getpid()}_{int(time.time())} = 1;\n"
        res["first_compile_runtime_cached"] = _compile_in_child(src + nonce, tmp)
        hits = [_compile_in_child(src, tmp) for _ in range(3)]
        if args.first_use:
            # zig (the bundled clang) builds libc++, libc++abi, libunwind and
            # glibc stubs into its own cache the first time it links C++.
            fresh = tempfile.mkdtemp(prefix="mk-bench-first-")
            try:
                zig = os.path.join(fresh, "zig")
                res["first_use"] = _compile_in_child(
                    src + nonce.replace("nonce", "nonce_first"), os.path.join(fresh, "mk"),
                    {"ZIG_GLOBAL_CACHE_DIR": zig, "ZIG_LOCAL_CACHE_DIR": zig})
            finally:
                shutil.rmtree(fresh, ignore_errors=True)
        res["cache_hit_runs"] = hits
        ok = [h["compile_s"] for h in hits if "compile_s" in h]
        if ok:
            res["cache_hit_s"] = statistics.median(ok)
            res["import_s"] = statistics.median(h["import_s"] for h in hits if "import_s" in h)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


MEMORY_CHILD = r"""
import json, sys, time
import numpy as np
import metal_kernel

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    return None

def reset_peak():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False

src, n = open(sys.argv[1]).read(), int(sys.argv[2])
lib = metal_kernel.compile_shader(src)
# Start the worker pool and touch each worker's state on a small input first.
s = np.ones(4096, np.float32)
lib.saxpy(s, s, s, 1.0, threads=4096, group_size=256)
lib.reduce_tree(s, s, threads=4096, group_size=256)
out = {"baseline_rss": status("VmRSS")}
results = []
# saxpy: three n-float buffers
x = np.full(n, 1.0, np.float32); y = np.full(n, 2.0, np.float32); o = np.full(n, np.nan, np.float32)
buffers = x.nbytes + y.nbytes + o.nbytes
rss0 = status("VmRSS"); reset_ok = reset_peak()
t = time.perf_counter(); lib.saxpy(o, x, y, 3.0, threads=n, group_size=256); dt = time.perf_counter() - t
results.append({"kernel": "saxpy", "buffers": buffers, "rss_before": rss0, "peak": status("VmHWM"),
                "seconds": dt, "ok": bool(o[0] == 5.0 and o[-1] == 5.0)})
del x, y, o
# tree reduction (barriers -> fibers): one n-float input, n/256 partials
x = np.full(n, 1.0, np.float32); p = np.full(n // 256, np.nan, np.float32)
buffers = x.nbytes + p.nbytes
rss0 = status("VmRSS"); reset_peak()
t = time.perf_counter(); lib.reduce_tree(x, p, threads=n, group_size=256); dt = time.perf_counter() - t
results.append({"kernel": "reduce_tree", "buffers": buffers, "rss_before": rss0, "peak": status("VmHWM"),
                "seconds": dt, "ok": bool(p[0] == 256.0 and p[-1] == 256.0)})
out["reset_peak"] = reset_ok
out["runs"] = results
print(json.dumps(out))
"""


def memory_report(args) -> dict:
    n = (1 << 23) if args.quick else (1 << 26)
    with tempfile.NamedTemporaryFile("w", suffix=".metal", delete=False) as f:
        f.write(MSL)
        path = f.name
    try:
        p = subprocess.run([sys.executable, "-c", MEMORY_CHILD, path, str(n)], env=_child_env(),
                           capture_output=True, text=True, timeout=300)
    finally:
        os.unlink(path)
    if p.returncode != 0 or not p.stdout.strip():
        return {"error": first_line((p.stderr.strip() or "no output").splitlines()[-1], 300)}
    out = json.loads(p.stdout.strip().splitlines()[-1])
    out["n"] = n
    for r in out["runs"]:
        r["peak_over_buffers"] = r["peak"] / r["buffers"]
        # what the dispatch itself added on top of the process with its buffers
        r["dispatch_overhead_bytes"] = r["peak"] - r["rss_before"]
    return out
