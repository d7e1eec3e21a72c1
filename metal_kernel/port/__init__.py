"""CUDA on the CPU, with CUDA's semantics, and CUDA ported to Metal.

    from metal_kernel import port
    lib = port.load_cuda(source, filename="kernels.cu")
    lib["vadd"](a, b, c, n, grid=4, block=256, shared_mem=0)
    lib["scale<float>"](x, y, 1.5, n, grid=(4, 1, 1), block=(128, 1, 1))

    p = port.port_cuda(source, filename="kernels.cu")   # the Metal port (to_metal/)
    p.metal, p.diagnostics, p.stats, p.load(), p.verify(...), p.verify_all(...)

Stages: parse.py (tree-sitter-cuda syntax tree of the preprocessed file) ->
analyse.py (kernels, instantiations, variables, host code, unsupported
constructs) -> emit.py (C++ with the runtime's entry points), compiled and
run by the runtime (metal_kernel.runtime: compiler, work-item loops,
fibers, cache, fault handling) against the CUDA headers in include/mkcuda.
library.py and binding.py are the Python side of a launch.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..runtime.compiler import CompileOptions
from ..runtime.library import load_library
from ..runtime.errors import KernelError, KernelTimeout, MetalCompileError
from .frontend import CudaCompileError
from .library import CudaKernel, CudaLibrary, Printed

__all__ = ["load_cuda", "CudaLibrary", "CudaKernel", "CudaCompileError", "KernelError", "KernelTimeout",
           "Printed", "port_cuda", "PortResult", "Diagnostic"]


def load_cuda(source: str, filename: str = "kernels.cu", include_dirs: Sequence[str] = (),
              defines: Mapping | None = None) -> CudaLibrary:
    """Compiles CUDA source for the CPU runtime.

    `filename` names the source in messages (and, when it exists, its
    folder is searched for `#include "..."`); `include_dirs` and `defines`
    ({"NAME": value}) are the usual -I / -D. Host code is not run: its
    `<<<...>>>` launches and explicit instantiations say which kernel
    template instantiations exist. Raises CudaCompileError (a SyntaxError
    with `filename` / `lineno`) for code that does not compile or uses a
    construct the CPU cannot run (inline PTX, textures, grid.sync(),
    dynamic parallelism).
    """
    if not isinstance(source, str):
        raise TypeError(f"load_cuda expects the CUDA source as a str, got {type(source).__name__}")
    dirs = [str(d) for d in include_dirs]
    here = os.path.dirname(os.path.abspath(filename))
    if os.path.isfile(filename) and here not in dirs:
        dirs.append(here)
    opts = CompileOptions(
        include_dirs=tuple(dirs),
        defines=tuple(sorted((str(k), None if v is None else str(v)) for k, v in (defines or {}).items())),
        source_name=filename,
        frontend="cuda",
    )
    try:
        return load_library(source, opts, CudaLibrary)
    except CudaCompileError:
        raise
    except MetalCompileError as e:
        raise CudaCompileError(e.detail, file=e.filename, line=e.lineno, text=e.text,
                               compiler_output=e.compiler_output) from None


from .to_metal.diagnostics import Diagnostic  # noqa: E402 - the port builds on load_cuda above
from .to_metal.porting import PortResult, port_cuda  # noqa: E402
