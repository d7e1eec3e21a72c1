"""What the benchmark ran on, and the machine classes it reports for.

A machine class fixes the instruction set every contender is built for:
`avx512` is this CPU's own (-march=native, on a CPU with AVX-512); `avx2`
builds everything for a Zen 3 class CPU (AVX2 + FMA, no AVX-512) on
whatever x86 CPU runs the benchmark, which is how the AVX2 figures are
produced on an AVX-512 machine:

- metal-kernel's kernels: METAL_KERNEL_CXXFLAGS=-march=znver3 (the last
  -march clang sees wins; the flags are part of the compile cache key);
- PoCL: its LLVM's target CPU znver3 (what it gets on this machine anyway);
- OpenBLAS (numpy): OPENBLAS_CORETYPE=Haswell, its AVX2 kernels;
- PyTorch's CPU operators: ATEN_CPU_CAPABILITY=avx2;
- the machine's limits (STREAM, FMA loop): built with -march=znver3.

The class is chosen before numpy and torch load (they read their variables
once), so `--isa avx2` re-runs the benchmark in a new process with them set.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

AVX2_MARCH = "znver3"  # Zen 3: the AVX2 EPYC the issue was measured on
CLASS_ENV = "BENCH_ISA_CLASS"


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def native_class() -> str:
    return "avx512" if "avx512f" in cpu_flags() else "avx2"


def current_class() -> str:
    """The class this process measures (set by --isa, else the CPU's own)."""
    return os.environ.get(CLASS_ENV) or native_class()


def class_march(cls: str) -> str | None:
    """The -march everything is built for in `cls` (None: native)."""
    return AVX2_MARCH if cls == "avx2" and native_class() != "avx2" else None


def zig_spelling(march: str, is_zig: bool) -> str:
    """zig's driver spells CPU names with underscores (x86_64_v3)."""
    return march.replace("-", "_") if is_zig else march


def class_environment(cls: str) -> dict:
    """The variables that build and run every contender for `cls`."""
    env = {CLASS_ENV: cls}
    march = class_march(cls)
    if march:
        from metal_kernel.runtime.toolchain import find_toolchain

        flag = f"-march={zig_spelling(march, find_toolchain().is_zig)}"
        extra = os.environ.get("METAL_KERNEL_CXXFLAGS", "")
        env.update({"METAL_KERNEL_CXXFLAGS": f"{extra} {flag}".strip(), "BENCH_POCL_CPU": AVX2_MARCH,
                    "OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2"})
    return env


def loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def describe(pocl_describe: str, workers) -> dict:
    """CPU model, flags, cores, memory, compiler, class, load."""
    import numpy as np

    import metal_kernel

    info = {"platform": platform.platform(), "python": platform.python_version(), "numpy": np.__version__,
            "metal_kernel": getattr(metal_kernel, "__version__", "?"), "class": current_class(),
            "native_class": native_class()}
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
        for line in cpuinfo.splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        info["cpu"] = platform.processor() or platform.machine()
    flags = cpu_flags()
    info["simd_flags"] = sorted(f for f in flags if f.startswith(("avx", "fma", "sse4")))
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
    info["llc_bytes"] = _llc_bytes()
    try:
        from metal_kernel.runtime.toolchain import find_toolchain

        info["compiler"] = find_toolchain().version
    except Exception as e:  # noqa: BLE001
        info["compiler"] = f"unavailable: {e}"
    info["mk_workers"] = workers
    info["march"] = class_march(current_class()) or "native"
    info["env"] = {k: os.environ[k] for k in ("METAL_KERNEL_CXXFLAGS", "BENCH_POCL_CPU", "OPENBLAS_CORETYPE",
                                              "ATEN_CPU_CAPABILITY", "METAL_KERNEL_STREAMING_STORES")
                   if os.environ.get(k)}
    info["pocl"] = pocl_describe
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = "n/a"
    info["loadavg_start"] = loadavg()
    return info


def _llc_bytes() -> int | None:
    try:
        from metal_kernel.runtime.library import last_level_cache_bytes

        return last_level_cache_bytes()
    except Exception:  # noqa: BLE001
        return None
