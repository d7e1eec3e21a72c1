"""A whole CUDA program (host code and kernels) built for the CPU and run:
`main` runs natively, `cudaMalloc` is malloc, every `k<<<...>>>(...)`
runs the kernel through the runtime with load_cuda's semantics
(mkcuda/host.h). For checking a CUDA file against its own host-side
reference code (benchmarks/llmc_cuda.py); load_cuda never runs host code.

Kernels run on fibers here (the work-item compiler needs the library
build's per-kernel entry points), so a program is slower than load_cuda.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..runtime.compiler import (COMMON_FLAGS, INCLUDE_DIR, CompileOptions, _atomic_write, _error, _sha,
                                build_runtime_library, cache_dir, cpu_identity, frontend_of, preprocess,
                                runtime_version)
from ..runtime.pass2 import NO_BF16_INSTRUCTIONS
from ..runtime.errors import MetalCompileError
from ..runtime.toolchain import find_toolchain
from .analyse import analyse
from .emit import emit_program
from .frontend import PORT_INCLUDE, PRELUDE, CudaCompileError
from .parse import parse

HOST_HEADER = PORT_INCLUDE / "mkcuda" / "host.h"


@dataclass
class ProgramRun:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool


def build_program(source: str, filename: str = "program.cu", include_dirs: Sequence[str] = (),
                  defines: Mapping | None = None, capture: bool = False) -> Path:
    """Compiles a CUDA program for the CPU; returns the executable (cached).
    `capture`: record each kernel's first launch (mkcuda/capture.h; the port
    verifies kernels on them)."""
    dirs = [str(d) for d in include_dirs]
    here = os.path.dirname(os.path.abspath(filename))
    if os.path.isfile(filename) and here not in dirs:
        dirs.append(here)
    defs = dict(defines or {})
    defs["MKCUDA_HOST_PROGRAM"] = "1"
    opts = CompileOptions(include_dirs=tuple(dirs),
                          defines=tuple(sorted((str(k), None if v is None else str(v)) for k, v in defs.items())),
                          source_name=filename, frontend="cuda")
    tc = find_toolchain()
    runtime = build_runtime_library()
    with tempfile.TemporaryDirectory(prefix="mk-program-", dir=cache_dir()) as tmp:
        try:
            pp = preprocess(source, opts, tc, tmp)
        except MetalCompileError as e:
            raise CudaCompileError(e.detail, file=e.filename, line=e.lineno, text=e.text,
                                   compiler_output=e.compiler_output) from None
        key = _sha("program", pp, tc.identity, runtime_version(), cpu_identity(), frontend_of(opts).version(),
                   "capture" if capture else "")
        exe = cache_dir() / "objects" / f"program-{key}"
        if exe.exists():
            return exe
        src = parse(pp)
        unit = analyse(src, host_program=True)
        if unit.errors:
            what, file, line = unit.errors[0]
            raise CudaCompileError(f"{what} is not supported by the CPU runtime", file=file, line=line)
        cpp = Path(tmp) / "program.cpp"
        cpp.write_text(emit_program(src, unit))
        out = Path(tmp) / "program"
        args = ["-x", "c++", *COMMON_FLAGS, *tc.march(), *NO_BF16_INSTRUCTIONS, "-O2", "-w", "-ferror-limit=10",
                "-fno-caret-diagnostics", "-DMKCUDA_HOST_PROGRAM=1", *(["-DMKCUDA_CAPTURE=1"] if capture else []),
                "-I", str(INCLUDE_DIR), "-I", str(PORT_INCLUDE),
                "-include", str(PRELUDE), "-include", str(HOST_HEADER), str(cpp),
                "-x", "none", runtime, f"-Wl,-rpath,{os.path.dirname(runtime)}", "-lm", "-lpthread",
                "-o", str(out)]
        proc = subprocess.run(tc.cxx(*args), capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            e = _error(proc.stderr, opts, source, tmp)
            raise CudaCompileError(e.detail, file=e.filename, line=e.lineno, text=e.text,
                                   compiler_output=e.compiler_output)
        _atomic_write(exe, out.read_bytes())
        os.chmod(exe, 0o755)
        return exe


def run_program(exe: Path, args: Sequence[str] = (), timeout: float | None = None, cwd: str | None = None) -> ProgramRun:
    try:
        proc = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd)
        return ProgramRun(proc.returncode, proc.stdout, proc.stderr, False)
    except subprocess.TimeoutExpired as e:
        return ProgramRun(-1, (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else
                          (e.stdout or ""), "", True)
