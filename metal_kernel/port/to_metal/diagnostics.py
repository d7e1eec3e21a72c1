"""A port's diagnostics: numbered (table.DIAGNOSTICS), located in the user's
CUDA source, shown on the console, in the JSON report and as a comment in
the generated Metal at the spot."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .table import DIAGNOSTICS

DOC_PAGE = "docs/port-diagnostics.md"


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: str  # "error", "warning", "note"
    line: int
    column: int
    message: str
    suggestion: str
    file: str = ""
    function: str = ""  # the kernel or helper it is in ("" at file scope)

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.file else f"line {self.line}"
        return f"{where}: {self.severity}: {self.code}: {self.message}"

    def comment(self) -> str:
        """The one-line Metal comment placed above the construct."""
        text = " ".join(self.message.split())
        return f"// {self.code} {self.severity}: {text} (fix: {self.suggestion.rstrip('.')}; " \
               f"{DOC_PAGE}#{self.code.lower()})"

    def to_json(self) -> dict:
        return asdict(self)


def make(code: str, where: tuple[str, int, int], message: str, function: str = "") -> Diagnostic:
    kind = DIAGNOSTICS[code]
    file, line, column = where
    return Diagnostic(code, kind.severity, line, column, message, kind.suggestion, file, function)
