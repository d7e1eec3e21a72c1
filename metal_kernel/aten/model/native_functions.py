"""native_functions.yaml as data: torchgen's parse plus the text spans we edit.

torchgen does the parsing and validation (`parse_native_yaml_struct`,
`error_check_native_functions`); this module adds what torchgen does not keep:
the line span of every entry and of every `dispatch:` row, so edits can be
surgical. Text is always parsed from memory, never through torchgen's
path-keyed cache, so an edited file is re-validated for real.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path

import yaml
from torchgen.gen import (
    LineLoader,
    error_check_native_functions,
    parse_native_yaml_struct,
    parse_tags_yaml_struct,
)
from torchgen.model import DispatchKey, NativeFunction, OperatorName

from ..errors import AtenError

_ENTRY_START = re.compile(r"^- func:")
_DISPATCH_HEADER = re.compile(r"^(?P<indent>\s+)dispatch:\s*(#.*)?$")
_DISPATCH_ROW = re.compile(
    r"^(?P<indent>\s+)(?P<keys>[A-Za-z0-9_]+(?:\s*,\s*[A-Za-z0-9_]+)*)\s*:\s*"
    r"(?P<kernel>[A-Za-z0-9_:]+)(?P<trail>\s*(#.*)?)$"
)

# Dispatch keys meaning "this kernel runs on every backend".
COMPOSITE_KEYS = frozenset(
    {"CompositeImplicitAutograd", "CompositeExplicitAutograd",
     "CompositeExplicitAutogradNonFunctional", "CompositeImplicitAutogradNestedTensor"}
)


@dataclass(frozen=True)
class DispatchRow:
    """One `KEYS: kernel` line inside an entry's `dispatch:` block (0-based index)."""

    index: int
    indent: str
    keys: tuple[str, ...]
    kernel: str
    trail: str

    def render(self, keys: tuple[str, ...] | None = None) -> str:
        return f"{self.indent}{', '.join(keys or self.keys)}: {self.kernel}{self.trail}"


@dataclass
class Entry:
    """One `- func:` entry: torchgen's NativeFunction plus its text location."""

    fn: NativeFunction
    start: int  # 0-based index of the `- func:` line
    end: int  # exclusive
    dispatch_header: int | None = None
    rows: list[DispatchRow] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.fn.func.name)

    @property
    def line(self) -> int:
        return self.start + 1

    def row_for(self, key: str) -> DispatchRow | None:
        for row in self.rows:
            if key in row.keys:
                return row
        return None

    @property
    def composite(self) -> bool:
        """Runs on every backend: composite kernel, or no dispatch at all."""
        if self.fn.structured_delegate is not None:
            return False
        if not self.rows:
            return self.dispatch_header is None
        return any(k in COMPOSITE_KEYS for row in self.rows for k in row.keys)


def _yaml_error(err: Exception, path: Path) -> AtenError:
    mark = getattr(err, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    return AtenError(f"invalid YAML: {getattr(err, 'problem', err)}", path, line)


def parse_text(text: str, path: Path, tags_path: Path):
    """Parse and validate native_functions.yaml text with torchgen; AtenError on failure."""
    try:
        return _parse_cached(text, Path(tags_path).read_text())
    except yaml.YAMLError as err:
        raise _yaml_error(err, path) from None
    except Exception as err:  # torchgen raises AssertionError/Exception with context
        msg = " ".join(str(err).split())
        m = re.search(r"native_functions\.yaml:(\d+)", msg)
        raise AtenError(f"torchgen rejects the file: {msg}", path, int(m.group(1)) if m else None) from None


@lru_cache(maxsize=8)
def _parse_cached(text: str, tags_text: str):
    """Keyed on the texts themselves (not the paths, unlike torchgen's own cache): an edited
    file is always parsed anew, an unchanged one (in any tree) only once."""
    es = yaml.load(text, Loader=LineLoader)
    tags = parse_tags_yaml_struct(yaml.load(tags_text, Loader=LineLoader), path="tags.yaml")
    parsed = parse_native_yaml_struct(es, tags, path="native_functions.yaml", skip_native_fns_gen=True)
    error_check_native_functions(parsed.native_functions)
    return parsed


def _scan_entries(lines: list[str], fns: list[NativeFunction]) -> list[Entry]:
    starts = [i for i, line in enumerate(lines) if _ENTRY_START.match(line)]
    by_line = {fn.loc.line: fn for fn in fns}
    entries = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        fn = by_line.get(start + 1)
        if fn is None:
            continue
        entry = Entry(fn=fn, start=start, end=end)
        for i in range(start + 1, end):
            m = _DISPATCH_HEADER.match(lines[i])
            if m:
                entry.dispatch_header = i
                base = len(m.group("indent"))
                for j in range(i + 1, end):
                    line = lines[j]
                    if not line.strip() or line.lstrip().startswith("#"):
                        continue
                    row = _DISPATCH_ROW.match(line)
                    if row is None or len(row.group("indent")) <= base:
                        break
                    keys = tuple(k.strip() for k in row.group("keys").split(","))
                    entry.rows.append(
                        DispatchRow(j, row.group("indent"), keys, row.group("kernel"), row.group("trail"))
                    )
                break
        entries.append(entry)
    return entries


class NativeFunctions:
    """The parsed file: entries, backend indices, op families."""

    def __init__(self, text: str, path: Path, tags_path: Path):
        self.path = Path(path)
        self.tags_path = Path(tags_path)
        self.text = text
        self.lines = text.splitlines()
        self.parsed = parse_text(text, self.path, self.tags_path)
        self.entries = _scan_entries(self.lines, self.parsed.native_functions)

    @classmethod
    def load(cls, path: Path, tags_path: Path) -> "NativeFunctions":
        return cls(Path(path).read_text(), path, tags_path)

    @cached_property
    def by_name(self) -> dict[str, Entry]:
        return {e.name: e for e in self.entries}

    def explicit(self, key: DispatchKey, fn: NativeFunction) -> bool:
        index = self.parsed.backend_indices.get(key)
        return index is not None and fn.func.name in index.index

    def effective(self, key: DispatchKey, fn: NativeFunction) -> bool:
        """Has a kernel for `key`, directly or through `structured_delegate`."""
        if self.explicit(key, fn):
            return True
        delegate: OperatorName | None = fn.structured_delegate
        index = self.parsed.backend_indices.get(key)
        return delegate is not None and index is not None and delegate in index.index

    def family(self, op: str) -> list[Entry]:
        """Every entry of the op: functional, in-place, out= and all overloads."""
        base = op.split(".", 1)[0].rstrip("_")
        family = [e for e in self.entries if str(e.fn.func.name.name.base) == base]
        if not family:
            raise AtenError(f"unknown operator '{op}': no `- func: {base}` entry", self.path)
        return family
