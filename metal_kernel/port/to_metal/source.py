"""Stage 0 of the port: the CUDA file as the front end sees it.

The same pass 1 as load_cuda (clang -E with the CUDA headers as stubs, the
user's own headers expanded), keeping comments (-C) so that the port reads
like the original, then the same tree-sitter parse and analysis
(port/parse.py, port/analyse.py). What came from the stub headers is not
part of the port; what came from the user's files (the .cu and the headers
it includes with "...") is.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...runtime.compiler import SOURCE_NAME, CompileOptions, _error, frontend_of
from ...runtime.errors import MetalCompileError
from ...runtime.toolchain import find_toolchain
from ..analyse import Unit, analyse
from ..frontend import PORT_INCLUDE
from ..parse import Source, parse

_LINE_MARKER = re.compile(rb'^# \d+ "[^\n]*', re.MULTILINE)


@dataclass
class CudaSource:
    """The preprocessed file, its syntax tree and analysis."""
    filename: str
    original: str  # the user's text
    pp: Source  # parse.Source of the preprocessed text
    unit: Unit
    text: bytes  # the preprocessed text with line markers blanked (#pragma lines kept)
    line_starts: list[int]

    def where(self, node_or_offset) -> tuple[str, int, int]:
        """(file, line, column) in the user's files."""
        offset = node_or_offset if isinstance(node_or_offset, int) else node_or_offset.start_byte
        file, line = self.pp.where(offset)
        i = bisect.bisect_right(self.line_starts, offset) - 1
        return file, line, offset - self.line_starts[i] + 1

    def is_user(self, offset: int) -> bool:
        """Whether the text at `offset` came from the user's files (not a stub header)."""
        file, _ = self.pp.where(offset)
        if file.startswith("<"):
            return False
        return not os.path.abspath(file).startswith(str(PORT_INCLUDE))

    def node_text(self, node) -> str:
        return self.text[node.start_byte:node.end_byte].decode("utf-8", errors="replace")


class PreprocessError(Exception):
    def __init__(self, message: str, file: str | None, line: int | None):
        super().__init__(message)
        self.file, self.line = file, line


def preprocess_cuda(source: str, filename: str, include_dirs: Sequence[str] = (),
                    defines: Mapping | None = None) -> str:
    """clang -E -C of the CUDA file, as load_cuda's pass 1 does it."""
    dirs = [str(d) for d in include_dirs]
    here = os.path.dirname(os.path.abspath(filename))
    if os.path.isfile(filename) and here not in dirs:
        dirs.append(here)
    opts = CompileOptions(include_dirs=tuple(dirs),
                          defines=tuple(sorted((str(k), None if v is None else str(v))
                                               for k, v in (defines or {}).items())),
                          source_name=filename, frontend="cuda")
    tc = find_toolchain()
    with tempfile.TemporaryDirectory(prefix="mk-port-") as tmp:
        with open(os.path.join(tmp, SOURCE_NAME), "w") as f:
            f.write(source)
        proc = subprocess.run(tc.cxx(*frontend_of(opts).pass1_args(opts), "-C", SOURCE_NAME),
                              capture_output=True, text=True, cwd=tmp)
        if proc.returncode != 0:
            e: MetalCompileError = _error(proc.stderr, opts, source, tmp)
            raise PreprocessError(e.detail.splitlines()[0] if e.detail else "preprocessing failed", e.filename,
                                  e.lineno)
    return proc.stdout.replace(f'"{SOURCE_NAME}"', '"' + filename.replace("\\", "\\\\") + '"')


def load_source(source: str, filename: str, include_dirs=(), defines=None) -> CudaSource:
    pp_text = preprocess_cuda(source, filename, include_dirs, defines)
    pp = parse(pp_text)
    unit = analyse(pp)
    text = _LINE_MARKER.sub(lambda m: b" " * len(m.group(0)), pp.data)
    starts = [0] + [i + 1 for i, b in enumerate(text) if b == 0x0A]
    return CudaSource(filename, source, pp, unit, text, starts)
