"""PoCL, the CPU OpenCL implementation the runtime is measured against:
its CPU device, set up so that it can build kernels on CPUs its LLVM 14 does
not know, and how a twin kernel is launched."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np


def first_line(e, limit: int = 160) -> str:
    text = str(e).strip().splitlines()
    s = text[0] if text else type(e).__name__
    return s if len(s) <= limit else s[: limit - 3] + "..."


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

    def cpu_name(self) -> str:
        """The CPU PoCL's LLVM builds kernels for (its device string ends
        with it, unless this benchmark had to choose one)."""
        if self.cpu_fix:
            return _pocl_cpu_name()
        return self.device.version.rstrip().rsplit("-", 1)[-1]

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

    def write(self, buf, host: np.ndarray):
        self.cl.enqueue_copy(self.queue, buf, host).wait()

    def run(self, kernel, global_size, local_size):
        """One dispatch of `kernel` to completion; local_size None lets PoCL choose."""
        self.cl.enqueue_nd_range_kernel(self.queue, kernel, global_size, local_size)
        self.queue.finish()
