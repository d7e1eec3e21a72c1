"""Errors a user of the runtime can cause, each with one clear message."""

from __future__ import annotations


class MetalCompileError(SyntaxError):
    """A kernel source that does not compile.

    A SyntaxError, as torch.mps.compile_shader raises, whose `filename` and
    `lineno` point at the user's source line (never at generated code).
    """

    def __init__(self, message: str, file: str = "<source>", line: int | None = None,
                 text: str | None = None, compiler_output: str = ""):
        where = f"{file}:{line}: " if line else ""
        super().__init__(f"{where}{message}")
        self.filename = file
        self.lineno = line
        self.text = text
        self.compiler_output = compiler_output
        self.detail = message


class KernelError(RuntimeError):
    """A kernel that failed while running (fault, trap, bad memory use)."""

    def __init__(self, message: str, kernel: str = "", thread=None, threadgroup=None,
                 address: int | None = None):
        super().__init__(message)
        self.kernel = kernel
        self.thread = thread
        self.threadgroup = threadgroup
        self.address = address


class KernelTimeout(KernelError, TimeoutError):
    """A dispatch that ran past its `timeout=` (or $METAL_KERNEL_TIMEOUT) and
    was stopped; its outputs are undefined."""


class ToolchainError(RuntimeError):
    """No usable C++ compiler for the runtime."""
