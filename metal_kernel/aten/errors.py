"""The one error type of `metal_kernel.aten`: a message a user can act on.

Every failure a user can cause (wrong tree, unknown op, malformed functor file,
an edit torchgen rejects) becomes an `AtenError` naming the file and line
involved; the CLI prints it on one line and exits with code 2.
"""

from __future__ import annotations

from pathlib import Path

EXIT_USER_ERROR = 2


class AtenError(Exception):
    """A user-caused error: `str(err)` is the complete message."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        self.message = message
        self.path = Path(path) if path is not None else None
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        if self.path is None:
            return self.message
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.message}"


class DifferentImplementation(AtenError):
    """The op is already implemented differently; `diff` shows what `--force` would change."""

    def __init__(self, message: str, path: str | Path | None = None, diff: str = ""):
        super().__init__(message, path)
        self.diff = diff
