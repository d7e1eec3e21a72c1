#!/usr/bin/env python3
"""metal-kernel runtime speed against PoCL (issue 4).

Runs each kernel in metal-kernel (MSL) and its OpenCL C twin in PoCL on the
same data, in one process, checks both results against numpy after every run
(outputs are poisoned with NaN before each run), and prints median times:

  a  saxpy          out = a*x + y over 16M floats
  b  reduce         256-wide threadgroup tree reduction, one barrier per level
  c  matmul         16x16-tiled 512^3 float matmul in threadgroup memory
  d  simd_reduce    two-level simd_sum reduction (PoCL: sub-groups or local memory)
  e  simd_gemm      simdgroup_matrix GEMM, next to single-threaded numpy matmul

and, in fresh subprocesses:

  compile           first compile of a kernel including <c10/metal/utils.h>
                    (empty cache dir) and the cache hit in a new process
  memory            peak RSS while running large kernels vs the buffers given

    python benchmarks/bench_runtime.py                 # full size
    python benchmarks/bench_runtime.py --quick         # small sizes
    python benchmarks/bench_runtime.py --cases a,b --repeat 20 --json > run.json
    python benchmarks/bench_runtime.py --show run.json  # the table of a saved run
    python benchmarks/bench_runtime.py --first-use      # + compile with empty zig caches

pyopencl / pocl-binary-distribution are optional (``pip install -e .[bench]``);
without them the PoCL column reads "n/a". Times are host wall-clock around one
dispatch (kernel call -> results in memory): for metal-kernel the Python call,
for PoCL enqueue + clFinish on buffers already on the device.
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
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# numpy's BLAS threads busy-wait after every matmul (the reference results
# use one); on a small machine they steal the cores both runtimes are timed on.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
try:
    import metal_kernel  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))
    import metal_kernel  # noqa: F401


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def first_line(e: BaseException | str, limit: int = 160) -> str:
    text = str(e).strip().splitlines()
    s = text[0] if text else type(e).__name__
    return s if len(s) <= limit else s[: limit - 3] + "..."


# ------------------------------------------------------------------ kernels --

MSL = r"""
#include <metal_stdlib>
using namespace metal;

kernel void saxpy(device float* out [[buffer(0)]],
                  device const float* x [[buffer(1)]],
                  device const float* y [[buffer(2)]],
                  constant float& a [[buffer(3)]],
                  uint i [[thread_position_in_grid]]) {
  out[i] = a * x[i] + y[i];
}

// One partial sum per 256-thread group; the host adds the partials.
kernel void reduce_tree(device const float* x [[buffer(0)]],
                        device float* partial [[buffer(1)]],
                        uint gid [[thread_position_in_grid]],
                        uint lid [[thread_position_in_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float buf[256];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = 128; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) partial[tg] = buf[0];
}

// C = A * B, all N x N row-major, N a multiple of 16; 16x16 groups.
kernel void matmul_tiled(device const float* A [[buffer(0)]],
                         device const float* B [[buffer(1)]],
                         device float* C [[buffer(2)]],
                         constant uint& N [[buffer(3)]],
                         uint2 gid [[thread_position_in_grid]],
                         uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[16][16];
  threadgroup float Bs[16][16];
  const uint row = gid.y, col = gid.x;
  float acc = 0.0f;
  for (uint t = 0; t < N; t += 16) {
    As[lid.y][lid.x] = A[row * N + t + lid.x];
    Bs[lid.y][lid.x] = B[(t + lid.y) * N + col];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 16; ++k) acc += As[lid.y][k] * Bs[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  C[row * N + col] = acc;
}

// simd_sum within each simdgroup, partials in threadgroup memory, barrier,
// simd_sum of the partials by simdgroup 0. Groups of 256 = 8 simdgroups.
kernel void reduce_simd(device const float* x [[buffer(0)]],
                        device float* partial [[buffer(1)]],
                        uint gid [[thread_position_in_grid]],
                        uint tg [[threadgroup_position_in_grid]],
                        uint lane [[thread_index_in_simdgroup]],
                        uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partials[32];
  const float s = simd_sum(x[gid]);
  if (lane == 0) partials[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    const float v = lane < 8 ? partials[lane] : 0.0f;
    const float t = simd_sum(v);
    if (lane == 0) partial[tg] = t;
  }
}
"""

# Separate library: it needs simdgroup_matrix, which may not compile yet.
MSL_GEMM = r"""
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// C = A * B (N x N, N a multiple of 32). A threadgroup of 4 simdgroups
// (128 threads) computes a 32x32 tile of C; each simdgroup a 16x16 sub-tile
// as 2x2 simdgroup_float8x8 accumulators, reading A and B from device memory.
kernel void gemm_simdgroup(device const float* A [[buffer(0)]],
                           device const float* B [[buffer(1)]],
                           device float* C [[buffer(2)]],
                           constant uint& N [[buffer(3)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint sg [[simdgroup_index_in_threadgroup]]) {
  const uint row0 = tg.y * 32 + (sg / 2) * 16;
  const uint col0 = tg.x * 32 + (sg % 2) * 16;
  simdgroup_float8x8 acc00 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 acc01 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 acc10 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 acc11 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 a0, a1, b0, b1;
  for (uint k = 0; k < N; k += 8) {
    simdgroup_load(a0, A + row0 * N + k, N);
    simdgroup_load(a1, A + (row0 + 8) * N + k, N);
    simdgroup_load(b0, B + k * N + col0, N);
    simdgroup_load(b1, B + k * N + col0 + 8, N);
    simdgroup_multiply_accumulate(acc00, a0, b0, acc00);
    simdgroup_multiply_accumulate(acc01, a0, b1, acc01);
    simdgroup_multiply_accumulate(acc10, a1, b0, acc10);
    simdgroup_multiply_accumulate(acc11, a1, b1, acc11);
  }
  simdgroup_store(acc00, C + row0 * N + col0, N);
  simdgroup_store(acc01, C + row0 * N + col0 + 8, N);
  simdgroup_store(acc10, C + (row0 + 8) * N + col0, N);
  simdgroup_store(acc11, C + (row0 + 8) * N + col0 + 8, N);
}
"""

OCL = r"""
__kernel void saxpy(__global float* out, __global const float* x,
                    __global const float* y, const float a) {
  const size_t i = get_global_id(0);
  out[i] = a * x[i] + y[i];
}

__kernel void reduce_tree(__global const float* x, __global float* partial) {
  __local float buf[256];
  const uint lid = get_local_id(0);
  buf[lid] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = 128; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[get_group_id(0)] = buf[0];
}

__kernel void matmul_tiled(__global const float* A, __global const float* B,
                           __global float* C, const uint N) {
  __local float As[16][16];
  __local float Bs[16][16];
  const uint col = get_global_id(0), row = get_global_id(1);
  const uint lx = get_local_id(0), ly = get_local_id(1);
  float acc = 0.0f;
  for (uint t = 0; t < N; t += 16) {
    As[ly][lx] = A[row * N + t + lx];
    Bs[ly][lx] = B[(t + ly) * N + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < 16; ++k) acc += As[ly][k] * Bs[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  C[row * N + col] = acc;
}

// Twin of reduce_simd without sub-groups: each 32-lane "simdgroup" is summed
// from local memory by its first lane, barrier, lane 0 sums the 8 partials.
__kernel void reduce_simd(__global const float* x, __global float* partial) {
  __local float vals[256];
  __local float partials[8];
  const uint lid = get_local_id(0);
  vals[lid] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  if ((lid & 31) == 0) {
    float s = 0.0f;
    for (uint i = 0; i < 32; ++i) s += vals[lid + i];
    partials[lid >> 5] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    float t = 0.0f;
    for (uint i = 0; i < 8; ++i) t += partials[i];
    partial[get_group_id(0)] = t;
  }
}
"""

# Used instead of the local-memory reduce_simd when the device has sub-groups.
OCL_SUBGROUPS = r"""
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
__kernel void reduce_simd(__global const float* x, __global float* partial) {
  __local float partials[256];
  const float s = sub_group_reduce_add(x[get_global_id(0)]);
  if (get_sub_group_local_id() == 0) partials[get_sub_group_id()] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_sub_group_id() == 0) {
    float v = 0.0f;
    for (uint i = get_sub_group_local_id(); i < get_num_sub_groups(); i += get_sub_group_size())
      v += partials[i];
    const float t = sub_group_reduce_add(v);
    if (get_sub_group_local_id() == 0) partial[get_group_id(0)] = t;
  }
}
"""

C10_KERNEL = r"""
#include <c10/metal/utils.h>
using namespace metal;
kernel void relu_opmath(device float* out [[buffer(0)]],
                        constant float* in [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  using T = c10::metal::opmath_t<float>;
  out[i] = float(c10::metal::max(T(in[i]), T(0)));
}
"""

PLAIN_KERNEL = r"""
#include <metal_stdlib>
using namespace metal;
kernel void fill(device float* out [[buffer(0)]], constant float& v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) { out[i] = v; }
"""


# ------------------------------------------------------------------ machine --

def _loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def machine_info(ocl) -> dict:
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "numpy": np.__version__, "metal_kernel": getattr(metal_kernel, "__version__", "?")}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        for line in cpuinfo.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        flags = next((ln for ln in cpuinfo.splitlines() if ln.startswith("flags")), "")
        info["simd"] = " ".join(f for f in ("sse4_2", "avx", "avx2", "fma", "avx512f") if f" {f}" in flags)
    except OSError:
        info["cpu"] = platform.processor() or platform.machine()
    info["logical_cpus"] = os.cpu_count()
    try:
        info["usable_cpus"] = len(os.sched_getaffinity(0))
    except AttributeError:
        info["usable_cpus"] = os.cpu_count()
    try:
        mem = Path("/proc/meminfo").read_text().split("\n")[0].split()
        info["memory_gib"] = round(int(mem[1]) / 2**20, 1)
    except (OSError, IndexError, ValueError):
        pass
    try:
        from metal_kernel.runtime.toolchain import find_toolchain

        info["compiler"] = find_toolchain().version
    except Exception as e:  # noqa: BLE001
        info["compiler"] = f"unavailable: {first_line(e)}"
    try:
        from metal_kernel.runtime.native import runtime

        info["mk_workers"] = int(runtime().mkrt_init(0))  # returns the pool size once started
    except Exception as e:  # noqa: BLE001
        info["mk_workers"] = f"unavailable: {first_line(e)}"
    info["cxxflags_env"] = os.environ.get("METAL_KERNEL_CXXFLAGS", "")
    info["loadavg_start"] = _loadavg()
    if ocl.ok:
        info["pocl"] = ocl.describe
    else:
        info["pocl"] = f"n/a ({ocl.reason})"
    return info


# -------------------------------------------------------------------- PoCL --

def _pocl_cpu_name() -> str:
    """A CPU name PoCL's LLVM 14 knows, for a CPU it does not. Measured on a
    Zen 5 EPYC (2 cores), PoCL's kernels run fastest with znver3 (tree
    reduction 2-3x faster than with skylake-avx512, the CPU PoCL's distro
    build pairs with its avx512 kernel library); haswell on Intel."""
    forced = os.environ.get("BENCH_POCL_CPU")
    if forced:
        return forced
    try:
        text = Path("/proc/cpuinfo").read_text().splitlines()
        flags = next(ln for ln in text if ln.startswith("flags")).split()
        vendor = next((ln.split(":", 1)[1].strip() for ln in text if ln.startswith("vendor_id")), "")
    except (OSError, StopIteration):
        flags, vendor = [], ""
    if "avx2" in flags and "fma" in flags:
        return "znver3" if vendor == "AuthenticAMD" else "haswell"
    return "x86-64"


def _fix_pocl_target_cpu(device) -> str:
    """PoCL 3.0's LLVM 14 does not know newer CPUs (e.g. Zen 5): it names the
    host CPU 'generic', which its own clang then rejects ("unknown target CPU
    'generic'", pocl/pocl#1049), so nothing builds. PoCL has no option for
    it; the device keeps the name as a `const char *` (llvm_cpu) in its
    cl_device_id struct, so point that at a CPU name LLVM 14 knows. Reads go
    through /proc/self/mem, which fails cleanly on unmapped addresses."""
    import ctypes
    import struct

    name = _pocl_cpu_name()

    def read(addr: int, n: int):
        try:
            with open("/proc/self/mem", "rb", buffering=0) as f:
                f.seek(addr)
                return f.read(n)
        except (OSError, ValueError, OverflowError):
            return None

    base = device.int_ptr
    blob = read(base, 2048) or b""
    for off in range(0, len(blob) - 7, 8):
        v = struct.unpack_from("<Q", blob, off)[0]
        if 4096 <= v < (1 << 47) and read(v, 8) == b"generic\0":
            buf = ctypes.create_string_buffer(name.encode())
            _KEEP.append(buf)
            ctypes.c_void_p.from_address(base + off).value = ctypes.addressof(buf)
            return (f"LLVM 14 in PoCL reports this CPU as 'generic' and cannot build for it; target CPU set "
                    f"to {name} (BENCH_POCL_CPU overrides)")
    return "LLVM 14 in PoCL reports this CPU as 'generic'; could not patch its target CPU"


_KEEP: list = []


class OpenCL:
    """The PoCL CPU device, or the reason it is not available."""

    def __init__(self):
        self.ok = False
        self.reason = ""
        self.describe = ""
        self.subgroups = False
        self.programs = {}
        try:
            import pyopencl as cl
        except ImportError as e:
            self.reason = f"pyopencl not installed ({e.name})"
            return
        self.cl = cl
        try:
            plats = [p for p in cl.get_platforms() if "portable computing language" in p.name.lower()
                     or "pocl" in p.name.lower()]
            if not plats:
                self.reason = "no PoCL platform (pip install pocl-binary-distribution)"
                return
            devs = plats[0].get_devices(device_type=cl.device_type.CPU) or plats[0].get_devices()
            if not devs:
                self.reason = "PoCL has no CPU device"
                return
            self.device = devs[0]
            self.cpu_fix = ""
            if self.device.version.rstrip().endswith("-generic"):
                self.cpu_fix = _fix_pocl_target_cpu(self.device)
            self.ctx = cl.Context(devices=[self.device])
            self.queue = cl.CommandQueue(self.ctx)
            cl.Program(self.ctx, "__kernel void probe(__global float* a) { a[0] = 1.0f; }").build()
        except Exception as e:  # noqa: BLE001
            self.reason = f"OpenCL setup failed: {first_line(e)}"
            return
        d = self.device
        ext = d.extensions.split()
        feats = ""
        try:
            feats = " ".join(f.name for f in d.opencl_c_features)
        except Exception:  # noqa: BLE001
            pass
        self.subgroups = "cl_khr_subgroups" in ext or "__opencl_c_subgroups" in feats
        self.describe = (f"{plats[0].version} | device {d.name} | {d.max_compute_units} compute units | "
                         f"sub-groups: {'yes' if self.subgroups else 'no (cl_khr_subgroups absent)'}")
        if self.cpu_fix:
            self.describe += f" | {self.cpu_fix}"
        self.ok = True

    def keep(self, objs: list):
        """Holds buffers until the next case (pyopencl's set_args does not)."""
        self.kept = objs

    def program(self, src: str):
        if src not in self.programs:
            t = time.perf_counter()
            self.programs[src] = (self.cl.Program(self.ctx, src).build(), time.perf_counter() - t)
        return self.programs[src]

    def buffer_in(self, a: np.ndarray):
        mf = self.cl.mem_flags
        return self.cl.Buffer(self.ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)

    def buffer_out(self, nbytes: int):
        return self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, nbytes)

    def poison(self, buf, nbytes: int):
        self.cl.enqueue_fill_buffer(self.queue, buf, np.float32(np.nan), 0, nbytes).wait()

    def read(self, host: np.ndarray, buf):
        self.cl.enqueue_copy(self.queue, host, buf).wait()
        return host


# ------------------------------------------------------------------- timing --

@dataclass
class Side:
    """One implementation of a case: run it, poison its output, read it back
    and check it (check returns an error text or None)."""
    run: Callable[[], None]
    poison: Callable[[], None]
    read: Callable[[], object]
    check: Callable[[object], str | None]
    times: list = field(default_factory=list)
    planned: int = 0
    result: dict | None = None  # set when the side fails


def bench(sides: dict, warmup: int, repeat: int, budget: float) -> dict:
    """Median wall time of each side's `run`, the sides interleaved run by run
    (so that load drift on a shared machine hits both alike). Every run is
    poisoned before and checked after. After the warm-up, a side's number of
    timed runs shrinks (to at least 3) to keep it within `budget` seconds; a
    warm-up run longer than budget/4 ends that side's warm-up."""
    def once(side: Side, i: int) -> float | None:
        try:
            side.poison()
            t0 = time.perf_counter()
            side.run()
            dt = time.perf_counter() - t0
            err = side.check(side.read())
        except Exception as e:  # noqa: BLE001
            side.result = {"status": "error", "reason": f"run {i + 1}: {first_line(e, 300)}"}
            return None
        if err:
            side.result = {"status": "wrong", "reason": f"run {i + 1}: {err}"}
            return None
        return dt

    def plan(dt: float) -> int:
        return max(3, min(repeat, int(budget / max(dt, 1e-9))))

    warm = {k: 0 for k in sides}
    for sd in sides.values():
        sd.planned = repeat
    for i in range(max(warmup, 0)):
        for k, sd in sides.items():
            if sd.result is not None or warm[k] < i:
                continue
            dt = once(sd, i)
            if dt is None:
                continue
            sd.planned = plan(dt)
            if dt <= budget / 4:
                warm[k] += 1
    while True:
        active = [(k, sd) for k, sd in sides.items() if sd.result is None and len(sd.times) < sd.planned]
        if not active:
            break
        for k, sd in active:
            dt = once(sd, warm[k] + len(sd.times))
            if dt is None:
                continue
            sd.times.append(dt)
            if warmup == 0 and len(sd.times) == 1:
                sd.planned = plan(dt)
    out = {}
    for k, sd in sides.items():
        if sd.result is not None:
            out[k] = sd.result
        else:
            t = sd.times
            out[k] = {"status": "ok", "median_s": statistics.median(t), "min_s": min(t), "runs": len(t)}
    return out


def close(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != {want.shape}"
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
    if bad.any():
        idx = np.flatnonzero(bad.ravel())
        k = int(idx[0])
        return (f"{name}: {idx.size} of {got.size} elements wrong (first at flat index {k}: "
                f"got {got.ravel()[k]!r}, want {want.ravel()[k]!r})")
    return None


# -------------------------------------------------------------------- cases --

@dataclass
class Case:
    key: str
    letter: str
    title: str
    full: int
    quick: int
    size_text: Callable[[int], str]
    work: Callable[[int], float]  # elements or flops per run
    unit: str  # "elem/s" or "GFLOP/s"
    setup: Callable  # (n, rng) -> data dict with "expected"...
    ours: Callable  # (lib_getter, data) -> (run, poison, read, check)
    pocl: Callable | None  # (ocl, data) -> (run, poison, read, check, note)
    reference: str = "PoCL"
    target: float | None = None  # issue 4: median time ratio metal-kernel/PoCL
    notes: list = field(default_factory=list)


def _check_partials(d):
    want_part, want_total = d["want_partials"], d["want_total"]

    def check(p):
        err = close("partial sums", p, want_part, rtol=1e-4, atol=1e-3)
        if err:
            return err
        total = float(p.astype(np.float64).sum())
        if not np.isclose(total, want_total, rtol=1e-5):
            return f"total {total} != {want_total}"
        return None
    return check


def setup_saxpy(n, rng):
    x = rng.random(n, dtype=np.float32)
    y = rng.random(n, dtype=np.float32)
    a = 2.5
    return {"n": n, "x": x, "y": y, "a": a, "want": (np.float32(a) * x + y).astype(np.float32),
            "out": np.empty(n, np.float32)}


def ours_saxpy(lib, d):
    k, out = lib().saxpy, d["out"]
    return (lambda: k(out, d["x"], d["y"], d["a"], threads=d["n"], group_size=256),
            lambda: out.fill(np.nan), lambda: out,
            lambda o: close("out", o, d["want"], rtol=1e-5, atol=1e-6))


def pocl_saxpy(ocl, d):
    prog, _ = ocl.program(OCL)
    k = ocl.cl.Kernel(prog, "saxpy")
    n = d["n"]
    x, y, out = ocl.buffer_in(d["x"]), ocl.buffer_in(d["y"]), ocl.buffer_out(4 * n)
    host = np.empty(n, np.float32)
    k.set_args(out, x, y, np.float32(d["a"]))
    ocl.keep([x, y, out])  # pyopencl kernels do not keep their argument buffers alive

    def run():
        ocl.cl.enqueue_nd_range_kernel(ocl.queue, k, (n,), (256,))
        ocl.queue.finish()
    return (run, lambda: ocl.poison(out, 4 * n), lambda: ocl.read(host, out),
            lambda o: close("out", o, d["want"], rtol=1e-5, atol=1e-6), "")


def setup_reduce(n, rng):
    x = rng.random(n, dtype=np.float32)
    return {"n": n, "x": x, "want_partials": x.reshape(-1, 256).astype(np.float64).sum(1),
            "want_total": float(x.astype(np.float64).sum()), "out": np.empty(n // 256, np.float32)}


def _ours_reduce(name):
    def make(lib, d):
        k, out = getattr(lib(), name), d["out"]
        return (lambda: k(d["x"], out, threads=d["n"], group_size=256),
                lambda: out.fill(np.nan), lambda: out, _check_partials(d))
    return make


def _pocl_reduce(name, simd=False):
    def make(ocl, d):
        note = ""
        src = OCL
        if simd and ocl.subgroups:
            src, note = OCL_SUBGROUPS, "PoCL twin: sub_group_reduce_add"
        elif simd:
            note = "PoCL twin: local memory (no cl_khr_subgroups on the PoCL CPU device)"
        prog, _ = ocl.program(src)
        k = ocl.cl.Kernel(prog, name)
        n, m = d["n"], d["n"] // 256
        x, out = ocl.buffer_in(d["x"]), ocl.buffer_out(4 * m)
        host = np.empty(m, np.float32)
        k.set_args(x, out)
        ocl.keep([x, out])

        def run():
            ocl.cl.enqueue_nd_range_kernel(ocl.queue, k, (n,), (256,))
            ocl.queue.finish()
        return run, lambda: ocl.poison(out, 4 * m), lambda: ocl.read(host, out), _check_partials(d), note
    return make


def setup_matmul(n, rng):
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    return {"n": n, "A": a, "B": b, "want": (a.astype(np.float64) @ b.astype(np.float64)),
            "out": np.empty((n, n), np.float32)}


def _check_mm(d):
    return lambda o: close("C", o.astype(np.float64), d["want"], rtol=1e-4, atol=2e-4 * np.sqrt(d["n"]))


def ours_matmul(lib, d):
    k, out, n = lib().matmul_tiled, d["out"], d["n"]
    return (lambda: k(d["A"], d["B"], out, n, threads=[n, n], group_size=[16, 16], arg_casts={3: "int32"}),
            lambda: out.fill(np.nan), lambda: out, _check_mm(d))


def pocl_matmul(ocl, d):
    prog, _ = ocl.program(OCL)
    k = ocl.cl.Kernel(prog, "matmul_tiled")
    n = d["n"]
    a, b, out = ocl.buffer_in(d["A"]), ocl.buffer_in(d["B"]), ocl.buffer_out(4 * n * n)
    host = np.empty((n, n), np.float32)
    k.set_args(a, b, out, np.uint32(n))
    ocl.keep([a, b, out])

    def run():
        ocl.cl.enqueue_nd_range_kernel(ocl.queue, k, (n, n), (16, 16))
        ocl.queue.finish()
    return run, lambda: ocl.poison(out, 4 * n * n), lambda: ocl.read(host, out), _check_mm(d), ""


def ours_gemm(lib, d):
    k, out, n = lib().gemm_simdgroup, d["out"], d["n"]
    return (lambda: k(d["A"], d["B"], out, n, threadgroups=[n // 32, n // 32], group_size=[128],
                      arg_casts={3: "int32"}),
            lambda: out.fill(np.nan), lambda: out, _check_mm(d))


NUMPY_1T = r"""
import json, statistics, sys, time
import numpy as np
n, repeat = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
a @ b
ts = []
for _ in range(repeat):
    t = time.perf_counter(); a @ b; ts.append(time.perf_counter() - t)
print(json.dumps({"median_s": statistics.median(ts), "min_s": min(ts), "runs": len(ts)}))
"""


def numpy_single_thread(n: int, repeat: int) -> dict:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
               BLIS_NUM_THREADS="1", VECLIB_MAXIMUM_THREADS="1")
    p = subprocess.run([sys.executable, "-c", NUMPY_1T, str(n), str(repeat)], env=env,
                       capture_output=True, text=True, timeout=300)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-300:])
    return json.loads(p.stdout.strip().splitlines()[-1])


CASES = [
    Case("saxpy", "a", "saxpy out=a*x+y", 1 << 24, 1 << 20, lambda n: f"{n / 2**20:g}M floats",
         lambda n: n, "elem/s", setup_saxpy, ours_saxpy, pocl_saxpy, target=1.0),
    Case("reduce", "b", "tree reduction (256, barrier/level)", 1 << 24, 1 << 20,
         lambda n: f"{n / 2**20:g}M floats", lambda n: n, "elem/s", setup_reduce,
         _ours_reduce("reduce_tree"), _pocl_reduce("reduce_tree"), target=1.0),
    Case("matmul", "c", "16x16-tiled matmul (tg memory)", 512, 128, lambda n: f"{n}^3",
         lambda n: 2.0 * n**3, "GFLOP/s", setup_matmul, ours_matmul, pocl_matmul, target=1.5),
    Case("simd_reduce", "d", "two-level simd_sum reduction", 1 << 24, 1 << 20,
         lambda n: f"{n / 2**20:g}M floats", lambda n: n, "elem/s", setup_reduce,
         _ours_reduce("reduce_simd"), _pocl_reduce("reduce_simd", simd=True), target=1.5),
    Case("simd_gemm", "e", "simdgroup_matrix GEMM", 512, 128, lambda n: f"{n}^3",
         lambda n: 2.0 * n**3, "GFLOP/s", setup_matmul, ours_gemm, None, reference="numpy 1-thread"),
]


def rate(case: Case, n: int, seconds: float) -> str:
    w = case.work(n) / seconds
    if case.unit == "GFLOP/s":
        return f"{w / 1e9:.2f} GFLOP/s"
    return f"{w:.3g} elem/s"


def run_case(case: Case, args, ocl: OpenCL, libs: dict) -> dict:
    n = case.quick if args.quick else case.full
    res = {"case": case.key, "letter": case.letter, "title": case.title, "size": case.size_text(n), "n": n,
           "reference": case.reference, "work": case.work(n), "unit": case.unit, "target": case.target,
           "notes": []}
    rng = np.random.default_rng(1234)
    d = case.setup(n, rng)

    sides = {}
    # metal-kernel
    key = "gemm" if case.key == "simd_gemm" else "main"
    if libs[key].get("error"):
        status = "unavailable" if case.key == "simd_gemm" else "error"
        res["ours"] = {"status": status, "reason": libs[key]["error"]}
    else:
        try:
            sides["ours"] = Side(*case.ours(lambda: libs[key]["lib"], d))
        except Exception as e:  # noqa: BLE001
            res["ours"] = {"status": "error", "reason": first_line(e, 300)}
            if args.verbose:
                traceback.print_exc()
    # reference
    if case.reference.startswith("numpy"):
        try:
            res["ref"] = {"status": "ok", **numpy_single_thread(n, args.repeat)}
        except Exception as e:  # noqa: BLE001
            res["ref"] = {"status": "error", "reason": first_line(e)}
    elif not ocl.ok:
        res["ref"] = {"status": "n/a", "reason": ocl.reason}
    else:
        try:
            run, poison, read, check, note = case.pocl(ocl, d)
            if note:
                res["notes"].append(note)
            sides["ref"] = Side(run, poison, read, check)
        except Exception as e:  # noqa: BLE001
            res["ref"] = {"status": "error", "reason": first_line(e, 300)}
            if args.verbose:
                traceback.print_exc()
    res.update(bench(sides, args.warmup, args.repeat, args.budget))
    for side in ("ours", "ref"):
        r = res[side]
        if r["status"] == "ok":
            r["rate"] = case.work(n) / r["median_s"]
    if res["ours"]["status"] == "ok" and res["ref"]["status"] == "ok":
        res["ratio"] = res["ours"]["median_s"] / res["ref"]["median_s"]
    return res


# ----------------------------------------------------------- subprocesses --

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


# ------------------------------------------------------------------ output --

def fmt_ms(r: dict) -> str:
    if r["status"] == "ok":
        return f"{r['median_s'] * 1e3:.2f}"
    return r["status"]


def print_report(machine: dict, results: list, comp: dict | None, mem: dict | None, args):
    p = print
    p("metal-kernel runtime benchmark (issue 4)")
    p(f"machine : {machine.get('cpu')}, {machine.get('usable_cpus')} usable / {machine.get('logical_cpus')} "
      f"logical CPUs, {machine.get('memory_gib', '?')} GiB, SIMD: {machine.get('simd', '?')}")
    p(f"system  : {machine['platform']}, Python {machine['python']}, numpy {machine['numpy']}")
    p(f"ours    : metal-kernel {machine['metal_kernel']}, {machine.get('mk_workers')} worker threads, "
      f"{machine.get('compiler')}" + (f", METAL_KERNEL_CXXFLAGS={machine['cxxflags_env']}"
                                      if machine.get("cxxflags_env") else ""))
    p(f"PoCL    : {machine['pocl']}")
    p(f"load    : {machine.get('loadavg_start')} at start, {machine.get('loadavg_end')} at end (1/5/15-min "
      "load averages; above ~0.5 other processes share the cores and the times are noisy)")
    p(f"timing  : median of up to {args.repeat} runs after {args.warmup} warm-up run(s), the two sides "
      f"interleaved; {'quick' if args.quick else 'full'} sizes; every run poisoned and checked against numpy")
    p("")
    head = ["case", "size", "runs", "metal-kernel ms", "ref ms", "ours/ref", "target", "metal-kernel rate",
            "ref rate", "reference"]
    rows = []
    for r in results:
        case = next(c for c in CASES if c.key == r["case"])
        o, f = r["ours"], r["ref"]
        rows.append([
            f"{r['letter']}) {r['case']}", r["size"],
            f"{o.get('runs', '-')}/{f.get('runs', '-')}",
            fmt_ms(o), fmt_ms(f),
            f"{r['ratio']:.2f}" if "ratio" in r else "n/a",
            (f"<= {r['target']:.1f}" + ((" ok" if r["ratio"] <= r["target"] else " missed") if "ratio" in r else ""))
            if r.get("target") else "-",
            rate(case, r["n"], o["median_s"]) if o["status"] == "ok" else "-",
            rate(case, r["n"], f["median_s"]) if f["status"] == "ok" else "-",
            r["reference"],
        ])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    line = "  ".join(h.ljust(w) for h, w in zip(head, widths))
    p(line)
    p("-" * len(line))
    for row in rows:
        p("  ".join(str(x).ljust(w) for x, w in zip(row, widths)))
    for r in results:
        for side, name in (("ours", "metal-kernel"), ("ref", r["reference"])):
            if r[side]["status"] not in ("ok",) and r[side].get("reason"):
                p(f"  {r['letter']}) {name}: {r[side]['status']}: {r[side]['reason']}")
        for note in r["notes"]:
            p(f"  {r['letter']}) {note}")
    if comp is not None:
        p("")
        p(f"compile ({comp.get('kernel', '?')}), each in a new process:")
        if comp.get("c10_error"):
            p(f"  c10/metal/utils.h kernel: unavailable: {comp['c10_error']}")

        def show(label, d):
            if not d:
                return
            if "error" in d:
                p(f"  {label}: error: {first_line(d['error'], 200)}")
            else:
                p(f"  {label}: {d['compile_s'] * 1e3:.0f} ms (process wall {d['process_wall_s']:.2f} s, "
                  f"import metal_kernel {d['import_s'] * 1e3:.0f} ms)")
        show("first compile, empty cache dir (builds the runtime library too)", comp.get("first_compile_empty_cache"))
        show("first compile of a new kernel, runtime library cached (target < 3 s)",
             comp.get("first_compile_runtime_cached"))
        show("first use on this machine: empty metal-kernel AND zig caches (--first-use)", comp.get("first_use"))
        if "cache_hit_s" in comp:
            runs = ", ".join(f"{h['compile_s'] * 1e3:.1f}" for h in comp["cache_hit_runs"] if "compile_s" in h)
            p(f"  cache hit (compile_shader in a new process; target < 50 ms): median {comp['cache_hit_s'] * 1e3:.1f} ms "
              f"[{runs}] (import metal_kernel {comp['import_s'] * 1e3:.0f} ms, not included)")
        elif comp.get("cache_hit_runs"):
            show("cache hit", comp["cache_hit_runs"][0])
    if mem is not None:
        p("")
        if "error" in mem:
            p(f"peak memory: error: {mem['error']}")
        else:
            p(f"peak memory (target <= 1.2x the buffers; new process, n = {mem['n'] / 2**20:g}M floats, "
              f"baseline RSS after import + "
              f"compile {mem['baseline_rss'] / 2**20:.0f} MiB, peak reset before each run: {mem['reset_peak']}):")
            for r in mem["runs"]:
                p(f"  {r['kernel']:<12} buffers {r['buffers'] / 2**20:7.0f} MiB  peak RSS {r['peak'] / 2**20:7.0f} MiB"
                  f"  = {r['peak_over_buffers']:.2f}x buffers  (dispatch added "
                  f"{r['dispatch_overhead_bytes'] / 2**20:+.1f} MiB; {r['seconds'] * 1e3:.0f} ms; "
                  f"result {'ok' if r['ok'] else 'WRONG'})")


# -------------------------------------------------------------------- main --

def parse_cases(text: str | None) -> tuple[list[Case], bool, bool]:
    extra = {"compile", "memory"}
    if not text:
        return CASES, True, True
    want = [t.strip() for t in text.split(",") if t.strip()]
    chosen, comp, mem = [], False, False
    for w in want:
        if w == "compile":
            comp = True
        elif w == "memory":
            mem = True
        else:
            c = next((c for c in CASES if w in (c.key, c.letter)), None)
            if c is None:
                names = ", ".join([f"{c.letter}/{c.key}" for c in CASES] + sorted(extra))
                raise SystemExit(f"unknown case {w!r}; choose from {names}")
            chosen.append(c)
    return chosen, comp, mem


def compile_libs(needed: set) -> dict:
    libs = {}
    for name, src in (("main", MSL), ("gemm", MSL_GEMM)):
        if name not in needed:
            continue
        t = time.perf_counter()
        try:
            libs[name] = {"lib": metal_kernel.compile_shader(src), "compile_s": time.perf_counter() - t}
        except Exception as e:  # noqa: BLE001
            libs[name] = {"error": first_line(e, 300), "compile_s": time.perf_counter() - t}
        log(f"  compiled {name} library in {libs[name]['compile_s']:.2f} s"
            + (f" (error: {libs[name]['error']})" if "error" in libs[name] else ""))
    return libs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=10, help="timed runs per case and side (default 10)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs first (default 2)")
    ap.add_argument("--quick", action="store_true", help="small sizes (seconds, not minutes)")
    ap.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    ap.add_argument("--cases", help="comma-separated: a..e or saxpy,reduce,matmul,simd_reduce,simd_gemm,"
                                    "compile,memory (default: all)")
    ap.add_argument("--budget", type=float, default=30.0,
                    help="seconds of timed runs per case and side; fewer runs (min 3) if slower (default 30)")
    ap.add_argument("--first-use", action="store_true",
                    help="also time a compile with empty zig caches (first use on a machine; ~1 min)")
    ap.add_argument("--verbose", action="store_true", help="tracebacks for errors")
    ap.add_argument("--show", metavar="FILE", help="print the table of a saved --json run and exit")
    args = ap.parse_args(argv)
    if args.show:
        doc = json.loads(Path(args.show).read_text())
        st = doc["settings"]
        args.repeat, args.warmup, args.quick = st["repeat"], st["warmup"], st["quick"]
        print_report(doc["machine"], doc["cases"], doc["compile"], doc["memory"], args)
        print(f"\n(total {doc['total_s']:.0f} s)")
        return 0
    cases, do_compile, do_memory = parse_cases(args.cases)

    t_start = time.perf_counter()
    ocl = OpenCL() if cases else None
    if ocl is None:
        ocl = OpenCL.__new__(OpenCL)
        ocl.ok, ocl.reason, ocl.describe = False, "not needed", ""
    machine = machine_info(ocl)
    needed = {"gemm" if c.key == "simd_gemm" else "main" for c in cases}
    libs = compile_libs(needed)
    results = []
    for c in cases:
        log(f"case {c.letter}) {c.key} ...")
        t = time.perf_counter()
        r = run_case(c, args, ocl, libs)
        r["case_wall_s"] = time.perf_counter() - t
        log(f"  {fmt_ms(r['ours'])} ms vs {fmt_ms(r['ref'])} ms ({r['case_wall_s']:.1f} s)")
        results.append(r)
    comp = mem = None
    if do_compile:
        log("compile times ...")
        comp = compile_report(args)
    if do_memory:
        log("peak memory ...")
        mem = memory_report(args)
    total = time.perf_counter() - t_start
    machine["loadavg_end"] = _loadavg()
    if args.json:
        doc = {"machine": machine, "settings": {"repeat": args.repeat, "warmup": args.warmup,
                                                "quick": args.quick, "budget_s": args.budget},
               "library_compile_s": {k: v["compile_s"] for k, v in libs.items()},
               "cases": results, "compile": comp, "memory": mem, "total_s": total}
        print(json.dumps(doc, indent=2, default=str))
    else:
        print_report(machine, results, comp, mem, args)
        print(f"\n(total {total:.0f} s)")
    bad = [r["case"] for r in results if r["ours"]["status"] in ("wrong", "error")]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
