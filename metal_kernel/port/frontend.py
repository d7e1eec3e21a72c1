"""CUDA as a source language of the runtime's compiler (runtime/compiler.py):
pass-1 arguments, the rewrite (parse -> analyse -> emit) and the prelude."""

from __future__ import annotations

from pathlib import Path

from ..runtime.compiler import FRONTENDS, CompileOptions, Frontend
from ..runtime.errors import MetalCompileError
from .analyse import analyse
from .emit import emit
from .parse import parse

HERE = Path(__file__).resolve().parent
PORT_INCLUDE = HERE / "include"
PASS1_CUDA = PORT_INCLUDE / "pass1" / "cuda"  # CUDA headers, as stubs
PASS1_LIBC = PORT_INCLUDE / "pass1" / "libc"  # C and C++ headers, as stubs (device libraries)
PRELUDE = PORT_INCLUDE / "mkcuda" / "prelude.h"
CUDA_ARCH = 900  # what the goldens were made on (H200); `#if __CUDA_ARCH__ >= ...` picks that path


class CudaCompileError(MetalCompileError):
    """A CUDA source that does not compile or uses a construct this runtime
    cannot run; `filename` and `lineno` point at the user's line."""


def pass1_args(opts: CompileOptions) -> list[str]:
    """clang -E arguments: CUDA, C and C++ headers are stubs (their
    declarations come in pass 2 from mkcuda/prelude.h), only their macros
    expand here."""
    args = ["-E", "-x", "c++", "-std=c++17", "-fno-caret-diagnostics", "-nostdinc", "-nostdinc++"]
    for d in opts.include_dirs:
        args += ["-I", str(d)]
    args += ["-I", str(PASS1_CUDA), "-I", str(PASS1_LIBC)]  # -I: before the system dirs zig adds
    args += ["-D__CUDACC__=1", "-D__NVCC__=1", f"-D__CUDA_ARCH__={CUDA_ARCH}", "-D__CUDACC_VER_MAJOR__=13",
             "-D__CUDACC_VER_MINOR__=0", "-DCUDART_VERSION=13000", "-DCUDA_VERSION=13000",
             "-D__CUDACC_RELAXED_CONSTEXPR__=1", "-D__HAVE_MK_RUNTIME__=1"]
    for name, value in opts.defines:
        args.append(f"-D{name}={value}" if value is not None else f"-D{name}")
    args += ["-include", str(PASS1_CUDA / "mkcuda_cuda.h"), "-include", str(PASS1_LIBC / "mkcuda_pass1.h")]
    return args


def _c_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class CudaRewrite:
    """A CUDA file as C++ for pass 2 (the runtime compiler's rewrite result):
    every kernel with its entry points, with or without the per-thread
    functions of the work-item build. CUDA libraries are built whole
    (Frontend.single_library), so `symbols` never selects."""

    def __init__(self, pp: str):
        self.src = parse(pp)
        self.unit = analyse(self.src)
        if self.unit.errors:
            what, file, line = self.unit.errors[0]
            more = "".join(f"\n{f}:{ln}: {w}" for w, f, ln in self.unit.errors[1:8])
            raise CudaCompileError(f"{what} is not supported by the CPU runtime{more}", file=file, line=line)
        self.kernels = [k.entry for k in emit(self.src, self.unit, False).kernels]
        self._texts: dict[bool, str] = {}

    def source(self, symbols=None, workitem: bool = False) -> str:
        if workitem not in self._texts:
            self._texts[workitem] = self._library_text(emit(self.src, self.unit, workitem))
        return self._texts[workitem]

    def check_source(self) -> str:
        return self.source()

    def _library_text(self, out) -> str:
        # What the host needs besides the entries, in the library itself (the
        # compiler's cache stores only the entries).
        names = ", ".join(_c_string(f"{kind}:{name}") for name, kind in out.symbols) or "nullptr"
        notes = _c_string("\n".join(self.unit.notes))
        return out.text + (
            f'extern "C" __attribute__((visibility("default"))) const char* const __mk_cuda_symbols[] = {{ {names} }};'
            f' extern "C" __attribute__((visibility("default"))) const unsigned __mk_cuda_nsymbols = {len(out.symbols)};'
            f' extern "C" __attribute__((visibility("default"))) const char* const __mk_cuda_notes = {notes};'
            ' extern "C" __attribute__((visibility("default"))) const ::mk::RuntimeApi* __mk_rt = nullptr;\n'
        )


def rewrite(pp: str, function_constants: dict) -> CudaRewrite:
    return CudaRewrite(pp)


def _version_files() -> tuple[Path, ...]:
    return tuple(sorted(p for p in PORT_INCLUDE.rglob("*") if p.is_file())) + tuple(
        sorted(HERE.glob("*.py")))


FRONTENDS["cuda"] = Frontend(
    name="cuda",
    pass1_args=pass1_args,
    rewrite=rewrite,
    prelude=PRELUDE,
    include_dirs=(str(PORT_INCLUDE),),
    # One library per file (its __constant__ / __device__ variables exist
    # once), through the work-item build: it decides per kernel, from the
    # IR, whether it synchronises.
    single_library=True,
    version_files=_version_files(),
)
