"""metal-kernel: run, check, port and upstream Metal compute kernels anywhere."""

from .authoring import MetalKernel, metal_kernel
from .check import Finding, Report, check
from .runtime import (BindingWarning, Kernel, KernelError, KernelTimeout, Library, MetalCompileError, ToolchainError,
                      compile_shader)
from .torch_ops import metal_op

__version__ = "0.1.0"

__all__ = ["compile_shader", "Library", "Kernel", "KernelError", "KernelTimeout", "MetalCompileError", "ToolchainError",
           "BindingWarning", "check", "Report", "Finding", "metal_kernel", "MetalKernel", "metal_op", "__version__"]


def _check_from_environment():
    """$METAL_KERNEL_CHECK=1 runs every dispatch of the program checked."""
    import os

    if os.environ.get("METAL_KERNEL_CHECK", "").strip().lower() not in ("", "0", "false", "no", "off"):
        from .check.env import activate

        activate()


_check_from_environment()
