"""Finds the C++ compiler the runtime builds kernels with, and the CPU it
builds for.

Order: $METAL_KERNEL_CXX (a command line), the clang bundled in the `ziglang`
wheel (PyPI), then a system clang++ new enough for the extensions we use.

Kernels are built for this machine's CPU (`-march=native`) unless
$METAL_KERNEL_MARCH names another target, e.g. `x86-64-v3` (AVX2, no
AVX-512) to see what an AVX2-only machine runs; the target is part of every
cache key.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass

from .errors import ToolchainError

MIN_CLANG = 17  # arithmetic on __bf16, -fdeclspec properties on templates


@dataclass(frozen=True)
class Toolchain:
    command: tuple[str, ...]  # e.g. ("/…/zig", "c++")
    version: str  # first line of --version
    identity: str  # hash of command + version, part of every cache key
    is_zig: bool

    def cxx(self, *args: str) -> list[str]:
        return [*self.command, *args]

    def march(self) -> list[str]:
        """The target CPU flag: $METAL_KERNEL_MARCH (clang's spelling, e.g.
        x86-64-v3 or skylake-avx512) or native. zig's driver spells CPU
        names with underscores."""
        target = os.environ.get("METAL_KERNEL_MARCH", "").strip() or "native"
        return [f"-march={target.replace('-', '_') if self.is_zig else target}"]

    def link_shared(self, obj: str, out: str, *more: str) -> list[str]:
        """Links objects into a shared library without the C++ runtime:
        kernels and the scheduler need only libc and libm, which the Python
        process has already loaded (and zig would otherwise build libc++ on
        first use, a minute on a fresh machine)."""
        if self.is_zig:
            return [self.command[0], "ld.lld", "-shared", "--no-undefined-version", obj, *more, "-o", out]
        return [*self.command, "-shared", "-nostdlib++", obj, *more, "-o", out]


def _version(cmd: list[str]) -> str | None:
    try:
        out = subprocess.run(cmd + ["--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else None


def _clang_major(version: str) -> int:
    import re

    m = re.search(r"clang version (\d+)", version)
    return int(m.group(1)) if m else 0


def _zig_command() -> list[str] | None:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        return None
    zig = os.path.join(os.path.dirname(sys.modules["ziglang"].__file__), "zig")
    if os.path.exists(zig):
        return [zig, "c++"]
    return [sys.executable, "-m", "ziglang", "c++"]


@functools.lru_cache(maxsize=1)
def find_toolchain() -> Toolchain:
    candidates: list[tuple[list[str], bool]] = []
    env = os.environ.get("METAL_KERNEL_CXX")
    if env:
        candidates.append((shlex.split(env), "zig" in env))
    zig = _zig_command()
    if zig:
        candidates.append((zig, True))
    for name in ("clang++", "clang++-22", "clang++-21", "clang++-20", "clang++-19", "clang++-18",
                 "clang++-17"):
        path = shutil.which(name)
        if path:
            candidates.append(([path], False))
    tried = []
    for cmd, is_zig in candidates:
        version = _version(cmd)
        tried.append(f"{' '.join(cmd)}: {version or 'not runnable'}")
        if version and _clang_major(version) >= MIN_CLANG:
            ident = hashlib.sha256(("\0".join(cmd) + "\0" + version).encode()).hexdigest()[:16]
            return Toolchain(tuple(cmd), version, ident, is_zig)
    raise ToolchainError(
        f"metal-kernel needs clang >= {MIN_CLANG} to run Metal kernels on the CPU. "
        "Install it with `pip install ziglang` (bundles clang), or point "
        "METAL_KERNEL_CXX at a clang++. Tried: " + ("; ".join(tried) or "nothing found")
    )
