"""metal-kernel: run, check, port and upstream Metal compute kernels anywhere."""

from .runtime import Kernel, KernelError, Library, MetalCompileError, ToolchainError, compile_shader

__version__ = "0.1.0"

__all__ = ["compile_shader", "Library", "Kernel", "KernelError", "MetalCompileError", "ToolchainError",
           "__version__"]
