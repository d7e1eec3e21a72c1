"""torch/testing/_internal/common_mps.py read as source (its lists exist only on Macs).

The module defines its expected-failure and skip lists inside `if
torch.backends.mps.is_available():`, so importing it on Linux yields nothing.
We parse it with `ast`: every dict literal assigned to a name containing
XFAILLIST or SKIPLIST is a list; its keys are `op.name + op.variant_test_name`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..errors import AtenError

LIST_MARKERS = ("XFAILLIST", "SKIPLIST")


@dataclass(frozen=True)
class ListEntry:
    list_name: str
    function: str  # enclosing function, e.g. mps_ops_modifier
    key: str
    value: str  # source text of the dtype list, or "None"
    start: int  # 1-based first line of the key
    end: int  # 1-based last line of the value


class CommonMps:
    def __init__(self, text: str, path: Path):
        self.path = Path(path)
        self.text = text
        try:
            self.tree = ast.parse(text, filename=str(path))
        except SyntaxError as err:
            raise AtenError(f"cannot parse: {err.msg}", path, err.lineno) from None

    @classmethod
    def load(cls, path: Path) -> "CommonMps":
        return cls(Path(path).read_text(), path)

    def _segment(self, node) -> str:
        """Source text of `node` (ast.get_source_segment re-splits the file per call)."""
        lines = self._lines
        if node.lineno == node.end_lineno:
            return lines[node.lineno - 1][node.col_offset:node.end_col_offset]
        parts = [lines[node.lineno - 1][node.col_offset:],
                 *lines[node.lineno:node.end_lineno - 1],
                 lines[node.end_lineno - 1][:node.end_col_offset]]
        return "\n".join(parts)

    @cached_property
    def entries(self) -> list[ListEntry]:
        self._lines = self.text.splitlines()
        found = []

        def visit(node, function):
            for child in ast.iter_child_nodes(node):
                fn = child.name if isinstance(child, ast.FunctionDef) else function
                target = value = None
                if isinstance(child, ast.Assign) and len(child.targets) == 1:
                    target, value = child.targets[0], child.value
                elif isinstance(child, ast.AnnAssign):
                    target, value = child.target, child.value
                if (isinstance(target, ast.Name) and isinstance(value, ast.Dict)
                        and any(m in target.id for m in LIST_MARKERS)):
                    for k, v in zip(value.keys, value.values):
                        if isinstance(k, ast.Constant) and isinstance(k.value, str):
                            found.append(ListEntry(
                                target.id, function or "", k.value,
                                self._segment(v),
                                k.lineno, v.end_lineno))
                visit(child, fn)

        visit(self.tree, None)
        return found

    def lookup(self, keys) -> list[ListEntry]:
        keys = set(keys)
        return [e for e in self.entries if e.key in keys]


def opinfo_key_to_aten(key: str) -> str:
    """Best-effort aten base name of an OpInfo key ("special.ndtri" -> "special_ndtri")."""
    for prefix in ("nn.functional.", "_refs."):
        key = key.removeprefix(prefix)
    return key.replace(".", "_")
