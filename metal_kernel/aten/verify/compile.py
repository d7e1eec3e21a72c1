"""Compile a kernels/*.metal file with the runtime, against the checkout's c10/metal headers."""

from __future__ import annotations

from ..errors import AtenError
from ..model.tree import PyTorchTree


def runtime_available() -> bool:
    import metal_kernel

    return hasattr(metal_kernel, "compile_shader")


def compile_kernel_file(path, tree: PyTorchTree):
    """The runtime's library for a kernels/*.metal file, with the checkout's c10/metal headers."""
    import metal_kernel

    try:
        return metal_kernel.compile_shader(path.read_text(), include_dirs=[str(tree.include_dir)])
    except Exception as err:  # the runtime's compile error carries the compiler's message
        first = next((l for l in str(err).splitlines() if l.strip()), type(err).__name__)
        raise AtenError(f"the runtime cannot compile this kernel file: {first}", path) from err
