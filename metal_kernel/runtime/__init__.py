"""Runs Metal Shading Language compute kernels on the CPU with Metal semantics."""

from .binding import BindingWarning
from .errors import KernelError, KernelTimeout, MetalCompileError, ToolchainError
from .library import Kernel, Library, compile_shader

__all__ = ["compile_shader", "Library", "Kernel", "KernelError", "KernelTimeout", "MetalCompileError", "ToolchainError",
           "BindingWarning"]
