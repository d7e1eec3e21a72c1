"""Planned file changes: unified diffs for --dry-run, atomic writes otherwise.

Every generator returns `FileChange`s (path, old text, new text); nothing writes
until all changes of a command are planned and validated. A write is a temp file
in the same directory followed by `os.replace`, so a reader never sees half a file.
"""

from __future__ import annotations

import difflib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FileChange:
    path: Path
    old: str | None  # None: the file is created
    new: str
    replaces: bool = False  # swaps an implementation already there for another (needs --force)

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self, label: str | None = None) -> str:
        name = label or str(self.path)
        old_lines = (self.old or "").splitlines(keepends=True)
        new_lines = self.new.splitlines(keepends=True)
        fromfile = "/dev/null" if self.old is None else f"a/{name}"
        return "".join(
            _terminated(difflib.unified_diff(old_lines, new_lines, fromfile, f"b/{name}"))
        )


def _terminated(lines):
    for line in lines:
        yield line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"


def read_or_none(path: Path) -> str | None:
    return Path(path).read_text() if Path(path).is_file() else None


def atomic_write(path: Path, text: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as f:
            f.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def apply_changes(changes: list[FileChange]) -> list[Path]:
    written = []
    for change in changes:
        if change.changed:
            atomic_write(change.path, change.new)
            written.append(change.path)
    return written


def edit_lines(text: str, replace: dict[int, str] | None = None,
               insert_after: dict[int, list[str]] | None = None,
               delete: set[int] | None = None) -> str:
    """Edit `text` by 0-based line index; given lines carry no newline."""
    replace, insert_after, delete = replace or {}, insert_after or {}, delete or set()
    lines = text.splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        ending = line[len(line.rstrip("\r\n")):] or "\n"
        if i not in delete:
            out.append(replace[i] + ending if i in replace else line)
        for extra in insert_after.get(i, []):
            out.append(extra + ending)
    return "".join(out)
