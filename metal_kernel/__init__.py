"""metal-kernel: run, check, port and upstream Metal compute kernels anywhere."""

from .authoring import MetalKernel, metal_kernel
from .runtime import (BindingWarning, Kernel, KernelError, KernelTimeout, Library, MetalCompileError, ToolchainError,
                      compile_shader)
from .torch_ops import metal_op

__version__ = "0.1.0"

__all__ = ["compile_shader", "Library", "Kernel", "KernelError", "KernelTimeout", "MetalCompileError", "ToolchainError",
           "BindingWarning", "metal_kernel", "MetalKernel", "metal_op", "__version__"]
