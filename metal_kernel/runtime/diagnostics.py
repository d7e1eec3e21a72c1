"""clang's output -> one MetalCompileError about the user's own first error.

The message shows the compiler's words located in the user's files, never
generated code: clang's source excerpts are dropped (they show the rewritten
line), the user's own line is shown instead, and a diagnostic located in the
generated entry points (runtime/entries.py, compiled under the file name
GENERATED_FILE, line n+1 for kernel n) is reported against the kernel it
belongs to. Errors inside the runtime's headers are reported where the
user's code asked for them (the "requested here" note in a user file).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from .entries import GENERATED_FILE
from .errors import MetalCompileError

INCLUDE_DIR = str(Path(__file__).resolve().parent / "include")

_DIAG = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<kind>fatal error|error|warning|note): "
                   r"(?P<msg>.*)$")
# zig's driver renames clang's output file after a compile; with
# -fsyntax-only there is none, and it reports that as an error.
_ZIG_RENAME = re.compile(r"error: failed to rename '.*' into '.*': FileNotFound")


@dataclass
class Diagnostic:
    file: str
    line: int
    col: int
    kind: str  # "error", "fatal error", "warning", "note"
    msg: str

    def __str__(self):
        return f"{self.file}:{self.line}:{self.col}: {self.kind}: {self.msg}"


def parse(output: str) -> list[Diagnostic]:
    """clang's diagnostics, in order, without excerpts, carets or summaries."""
    out = []
    for line in output.splitlines():
        m = _DIAG.match(line)
        if m and not _ZIG_RENAME.search(line):
            out.append(Diagnostic(m.group("file"), int(m.group("line")), int(m.group("col")),
                                  m.group("kind"), m.group("msg")))
    return out


def only_zig_rename(output: str) -> bool:
    """Whether a failed compile reported nothing but zig's rename complaint
    (a -fsyntax-only run that found no error)."""
    errors = [ln for ln in output.splitlines() if "error" in ln]
    return bool(errors) and all(_ZIG_RENAME.search(ln) for ln in errors)


def _is_runtime(file: str) -> bool:
    return file.startswith(INCLUDE_DIR) or "/metal_kernel/runtime/include/" in file


def _is_user(file: str) -> bool:
    return file != GENERATED_FILE and not _is_runtime(file) and not file.startswith("<")


class SourceLines:
    """The user's lines: the source string for its own name, files for the rest."""

    def __init__(self, source_name: str, source: str):
        self.name = source_name
        self.source = source.splitlines()

    def line(self, file: str, line: int) -> str | None:
        if file == self.name:
            lines = self.source
        else:
            try:
                lines = Path(file).read_text(errors="replace").splitlines()
            except OSError:
                return None
        return lines[line - 1] if 0 < line <= len(lines) else None


def _where_requested(diags: list[Diagnostic], i: int) -> Diagnostic | None:
    """For an error at diags[i] inside a runtime header: the first note
    after it (before the next error) located in a user file."""
    for d in diags[i + 1:]:
        if d.kind != "note":
            return None
        if _is_user(d.file):
            return d
    return None


def compile_error(output: str, source_name: str, source: str, kernels: dict[int, tuple[str, str, int]],
                  tmp_names: tuple[str, ...] = ()) -> MetalCompileError:
    """The user's first error in clang's `output`. `kernels` maps a symbol
    to (host name, file, line) for errors in generated code; `tmp_names`
    are paths of temporary files to show as `source_name`."""
    for tmp in tmp_names:
        output = output.replace(tmp, source_name)
    diags = parse(output)
    lines = SourceLines(source_name, source)
    shown = [d for d in diags if d.kind != "warning" and _is_user(d.file)][:20]
    detail_lines = "\n".join(str(d) for d in shown)
    errors = [(i, d) for i, d in enumerate(diags) if d.kind in ("error", "fatal error")]
    for i, d in errors:
        at = d if _is_user(d.file) else (_where_requested(diags, i) if _is_runtime(d.file) else None)
        if at is not None:
            return MetalCompileError(d.msg + "\n" + detail_lines, file=at.file, line=at.line,
                                     text=lines.line(at.file, at.line), compiler_output=detail_lines)
    for _, d in errors:
        if d.file == GENERATED_FILE and d.line - 1 in kernels:
            name, file, line = kernels[d.line - 1]
            msg = d.msg if "__mk" not in d.msg and "::mk::" not in d.msg else \
                "its parameters cannot be bound as Metal binds them"
            return MetalCompileError(f"kernel '{name}' cannot be called: {msg}", file=file, line=line,
                                     text=lines.line(file, line), compiler_output=detail_lines)
    if errors:
        d = errors[0][1]
        where = os.path.basename(d.file)
        return MetalCompileError(f"{d.msg} (in the runtime's {where}; this is a metal-kernel bug, please "
                                 "report it with the kernel source)", compiler_output=detail_lines)
    text = "\n".join(ln for ln in output.splitlines() if ln.strip() and "|" not in ln)[:2000]
    return MetalCompileError("compilation failed:\n" + text, compiler_output=text)
