"""Line tables of a kernel library's IR: each access's place in the user's
source (following inlined calls out of the runtime's headers), and the IR
without its debug information for the passes that follow."""

from __future__ import annotations

import os
import re

_MD_LINE = re.compile(r"^(!\d+) = (?:distinct )?!(\w+)\((.*)\)\s*$")
_FIELD = re.compile(r'(\w+): ("(?:[^"\\]|\\.)*"|![0-9]+|[^,]+)')


class DebugInfo:
    """DILocation / scope / file nodes of a module, resolved to sites in the
    user's files (following inlined calls out of the runtime's headers)."""

    def __init__(self, lines: list[str], runtime_dirs: tuple[str, ...]):
        self.nodes: dict[str, tuple[str, dict[str, str]]] = {}
        for ln in lines:
            if not ln.startswith("!"):
                continue
            m = _MD_LINE.match(ln)
            if m:
                fields = {k: v for k, v in _FIELD.findall(m.group(3))}
                self.nodes[m.group(1)] = (m.group(2), fields)
        self.runtime_dirs = runtime_dirs
        self.cache: dict[str, tuple[str, int, int, str] | None] = {}

    def _outward(self, scope: str, want: str, key: str) -> str:
        """Field `key` of the first `want` node on the way out from `scope`
        (a scope names its file directly, or through its parent)."""
        for _ in range(64):
            node = self.nodes.get(scope)
            if node is None:
                return ""
            kind, f = node
            if kind == want:
                return f.get(key, '""').strip('"')
            if want == "DIFile" and f.get("file", "").startswith("!"):
                scope = f["file"]
            else:
                scope = f.get("scope", "")
        return ""

    def _file(self, scope: str) -> str:
        return self._outward(scope, "DIFile", "filename")

    def _function(self, scope: str) -> str:
        return self._outward(scope, "DISubprogram", "name")

    def _is_user(self, file: str, scope: str) -> bool:
        if not file or file.endswith("kernel.cpp"):
            return False
        # clang writes a header below the compile's directory relative to it
        # (a checkout under /tmp, built in /tmp/...): compare absolute paths.
        where = os.path.normpath(os.path.join(self._outward(scope, "DIFile", "directory"), file))
        return not any(where.startswith(d) or file.startswith(d) for d in self.runtime_dirs)

    def site(self, dbg: str) -> tuple[str, int, int, str] | None:
        """(file, line, column, function) of the innermost frame of `dbg`
        that is in a user file."""
        if dbg in self.cache:
            return self.cache[dbg]
        loc = dbg
        out = None
        seen = 0
        while loc and seen < 64:
            seen += 1
            node = self.nodes.get(loc)
            if node is None or node[0] != "DILocation":
                break
            f = node[1]
            scope = f.get("scope", "")
            file = self._file(scope)
            if self._is_user(file, scope):
                out = (file, int(f.get("line", "0")), int(f.get("column", "0")), self._function(scope))
                break
            loc = f.get("inlinedAt", "")
        self.cache[dbg] = out
        return out


_DBG_ATTACH = re.compile(r",\s*!dbg !\d+")


def strip_debug(lines: list[str]) -> list[str]:
    """The module without debug information: no !dbg attachments, no debug
    records, no debug metadata nodes (and no references to them)."""
    removed: set[str] = set()
    for ln in lines:
        if ln.startswith("!"):
            m = _MD_LINE.match(ln)
            if m and m.group(2).startswith("DI"):
                removed.add(m.group(1))
    out = []
    for ln in lines:
        if ln.startswith("!llvm.dbg."):
            continue
        if ln.startswith("!"):
            m = re.match(r"^(!\d+) = ", ln)
            if m and m.group(1) in removed:
                continue
            if "!{" in ln and removed:
                # tuples (loop metadata) that name a location: drop those operands
                ln = re.sub(r"(,\s*)?!\d+", lambda mm: "" if mm.group(0).lstrip(", ") in removed else mm.group(0), ln)
                ln = ln.replace("!{, ", "!{")
        elif "#dbg_" in ln and ln.lstrip().startswith("#dbg_"):
            continue
        else:
            ln = _DBG_ATTACH.sub("", ln)
            if ln.startswith(("define ", "declare ")):
                ln = re.sub(r"\s!dbg !\d+", "", ln)
        out.append(ln)
    return out
