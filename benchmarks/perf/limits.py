"""The machine's limits, measured in the same run as the kernels, with the
same number of threads as metal-kernel's pool:

- memory bandwidth: STREAM-style triad (a = b + s*c), copy (a = b) and read
  (a sum), over arrays of the size the kernels use (limits.c); triad and
  copy are run with ordinary and with streaming (non-temporal) stores, and
  the faster counts: the limit is what the machine can do, not what one
  kind of store does. Bytes are counted as STREAM counts them (12 per
  element for triad, 8 for copy, 4 for read);
- compute: an FMA throughput loop (limits.c), and OpenBLAS's sgemm through
  numpy (benchmarks/perf/worker.py) at each matrix size the cases use.

Each is measured before and after the cases, and the limit is the fastest
run of either phase: what the machine can do when nothing else gets in the
way. The kernels are reported by their medians, so on a shared machine
their fractions of the limits err on the low side."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from timing import summary

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "limits.c"
KINDS = {"triad": 0, "copy": 1, "read": 2, "fma": 3}
BYTES_PER_ELEMENT = {"triad": 12, "copy": 8, "read": 4}


def build(march: str | None) -> ctypes.CDLL:
    """limits.c as a shared library, built for `march` (None: native)."""
    from metal_kernel.runtime.toolchain import find_toolchain

    from machine import zig_spelling

    tc = find_toolchain()
    flag = f"-march={zig_spelling(march, tc.is_zig) if march else 'native'}"
    key = hashlib.sha256(SOURCE.read_bytes() + flag.encode() + tc.identity.encode()).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"mk-bench-limits-{key}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        cmd = tc.cxx("-x", "c", "-std=c11", "-O2", flag, "-fPIC", "-shared", "-pthread", str(SOURCE), "-o", str(tmp))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"limits.c does not build: {p.stderr.strip()[:400]}")
        os.replace(tmp, out)
    lib = ctypes.CDLL(str(out))
    lib.mk_limit_run.restype = ctypes.c_double
    lib.mk_limit_run.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                 ctypes.c_float, ctypes.c_size_t, ctypes.c_long, ctypes.c_int]
    lib.mk_limit_vector_width.restype = ctypes.c_int
    return lib


def rates(s: dict, work: float, unit: str) -> dict:
    """Adds the rate of the median run and of the fastest (GB/s or GFLOP/s)."""
    s["work"] = work
    s[unit] = work / s["median_s"] / 1e9
    s[f"best_{unit}"] = work / s["min_s"] / 1e9
    return s


def _aligned(n: int) -> np.ndarray:
    raw = np.empty(n + 64, np.float32)
    off = (-raw.ctypes.data % 256) // 4
    a = raw[off:off + n]
    a.fill(1.0)
    return a


class Limits:
    def __init__(self, march: str | None, threads: int, elements: int):
        self.lib = build(march)
        self.threads = threads
        self.n = elements
        self.a, self.b, self.c = _aligned(elements), _aligned(elements), _aligned(elements)

    def _run(self, kind: str, streaming: bool, iters: int = 0) -> float:
        t = self.lib.mk_limit_run(KINDS[kind], int(streaming), self.a.ctypes.data, self.b.ctypes.data,
                                  self.c.ctypes.data, 0.5, self.n, iters, self.threads)
        if t <= 0:
            raise RuntimeError(f"{kind}: the helper threads could not be started")
        return t

    def side(self, kind: str, streaming: bool):
        """The memory kernel as a side timed with the cases (interleaved with
        them, so that its median sees the same load as theirs)."""
        from timing import Side

        # Its output is written just before each run, as the kernels' outputs
        # are when they are poisoned: the same lines in the cache for both.
        prepare = (lambda: self.a.fill(np.nan)) if kind != "read" else (lambda: None)
        s = Side(lambda: self._run(kind, streaming), prepare, lambda: None, lambda _: None)
        s.work = BYTES_PER_ELEMENT[kind] * self.n
        return s

    def memory(self, repeat: int) -> dict:
        """GB/s of each memory kernel and store kind: medians of interleaved runs."""
        variants = [("triad", False), ("triad", True), ("copy", False), ("copy", True), ("read", False)]
        times = {v: [] for v in variants}
        for v in variants:  # warm-up: pages touched, threads started once
            self._run(*v)
        for _ in range(repeat):
            for v in variants:
                times[v].append(self._run(*v))
        out = {}
        for (kind, streaming), ts in times.items():
            s = summary(ts)
            rates(s, BYTES_PER_ELEMENT[kind] * self.n, "gbs")
            out[f"{kind}{'_streaming' if streaming else ''}"] = s
        return out

    def fma(self, repeat: int) -> dict:
        """GFLOP/s of the FMA loop (12 chains, vector width of the build)."""
        iters = 2_000_000_000 // (12 * self.lib.mk_limit_vector_width() * 2)
        self._run("fma", False, iters)
        ts = [self._run("fma", False, iters) for _ in range(repeat)]
        s = summary(ts)
        flops = self.threads * iters * 12 * self.lib.mk_limit_vector_width() * 2
        rates(s, flops, "gflops")
        s["vector_width"] = self.lib.mk_limit_vector_width()
        return s


class Worker:
    """benchmarks/perf/worker.py in a process of its own (see there)."""

    def __init__(self, threads: int):
        # OPENBLAS_THREAD_TIMEOUT=4: OpenBLAS's threads sleep 2^4 cycles after
        # a call instead of spinning ~2^28, so sgemm can run in the same
        # rounds as the kernels without taking their cores (its own speed at
        # 512^3 did not change).
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", OPENBLAS_THREAD_TIMEOUT="4")
        self.p = subprocess.Popen([sys.executable, str(HERE / "worker.py")], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env=env)
        self.threads = threads

    def ask(self, **msg) -> dict:
        self.p.stdin.write(json.dumps(msg) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError("the worker process ended")
        out = json.loads(line)
        if "error" in out:
            raise RuntimeError(out["error"])
        return out

    def sgemm(self, n: int, repeat: int, warmup: int) -> dict:
        s = summary(self.ask(op="sgemm", n=n, repeat=repeat, warmup=warmup)["times_s"])
        return rates(s, 2.0 * n ** 3, "gflops")

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=30)
        except Exception:  # noqa: BLE001
            self.p.kill()


def measure(lim: Limits, worker: Worker, gemm_sizes: list[int], repeat: int) -> dict:
    """One phase of limit measurements."""
    out = {"memory": lim.memory(repeat), "fma": lim.fma(max(3, repeat // 2))}
    out["sgemm"] = {str(n): worker.sgemm(n, repeat, 2) for n in gemm_sizes}
    return out


def best(phases: list[dict]) -> dict:
    """The limit of each kind: the better median over the phases; memory
    kinds also over ordinary and streaming stores."""
    def top(values):
        return max(values) if values else None

    mem = {}
    for kind in ("triad", "copy", "read"):
        mem[kind] = top([p["memory"][k]["best_gbs"] for p in phases for k in p["memory"]
                         if k == kind or k == f"{kind}_streaming"])
    sizes = sorted({n for p in phases for n in p["sgemm"]}, key=int)
    return {"rule": "fastest run of either phase",
            "triad_gbs": mem["triad"], "copy_gbs": mem["copy"], "read_gbs": mem["read"],
            "fma_gflops": top([p["fma"]["best_gflops"] for p in phases]),
            "sgemm_gflops": {n: top([p["sgemm"][n]["best_gflops"] for p in phases if n in p["sgemm"]])
                             for n in sizes},
            "drift": {k: _drift([p["memory"][k]["gbs"] for p in phases])
                      for k in phases[0]["memory"]} if len(phases) > 1 else {}}


def _drift(values: list[float]) -> float:
    """Relative difference between phases (0.1 = the phases differ by 10%)."""
    return (max(values) - min(values)) / max(values) if values and max(values) > 0 else 0.0
