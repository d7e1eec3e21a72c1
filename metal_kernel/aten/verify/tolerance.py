"""The tolerances test_mps applies to an op, read from the checkout's test/test_mps.py.

`TestConsistency.test_output_match` compares MPS with CPU through
`self.assertEqual(cpu_out, mps_out, atol=atol, rtol=rtol)` with
`atol, rtol = self._compute_tolerances(op, dtype)`: relaxed pairs for the ops on
its FP32/FP16/BF16 low-precision lists and a few named ops, `(None, None)` --
assert_close's per-dtype defaults -- for every other op. That method and the
class-level lists it reads are taken from the file as source (ast) and run, so
the numbers are the checkout's own, whatever its version says.

Without test/test_mps.py in the checkout, a test_mps.py inside the installed torch
package is used; the 2.13 wheel ships none, so every dtype then gets the defaults
and the report says why.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import torch
from torch.testing._comparison import default_tolerances

TEST_MPS = "test/test_mps.py"
CLASS = "TestConsistency"
METHOD = "_compute_tolerances"


@lru_cache(maxsize=1)
def _installed_test_mps() -> Path | None:
    """A test_mps.py inside the installed torch package (wheels so far ship none)."""
    return next(iter(sorted(Path(torch.__file__).parent.rglob("test_mps.py"))), None)


@dataclass(frozen=True)
class Tolerance:
    atol: float | None  # None: assert_close's default for the dtype
    rtol: float | None
    source: str  # where the pair comes from, for the report

    def effective(self, dtype: torch.dtype) -> tuple[float, float]:
        if self.atol is not None and self.rtol is not None:
            return self.atol, self.rtol
        rtol, atol = default_tolerances(torch.empty(0, dtype=dtype))
        return atol, rtol

    def describe(self, dtype: torch.dtype) -> str:
        atol, rtol = self.effective(dtype)
        return f"atol {atol:g} rtol {rtol:g} ({self.source})"


class MpsTolerances:
    """`_compute_tolerances` of a test_mps.py, or assert_close defaults when there is none."""

    def __init__(self, path: Path | None, method=None, lists: dict | None = None, note: str = ""):
        self.path, self._method, self.lists, self.note = path, method, lists or {}, note

    @classmethod
    def load(cls, root: Path | None) -> "MpsTolerances":
        """From the checkout's test/test_mps.py, else from one the installed torch ships."""
        path = Path(root) / TEST_MPS if root is not None else None
        if path is None or not path.is_file():
            installed = _installed_test_mps()
            if installed is None:
                where = f"{path} does not exist" if path is not None else "no checkout given"
                return cls(None, note=f"{where} and torch {torch.__version__} ships no test_mps.py: "
                                      "assert_close defaults for every dtype, the low-precision lists unread")
            path = installed
        tree = ast.parse(path.read_text(), filename=str(path))
        cls_node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == CLASS), None)
        fn = next((n for n in (cls_node.body if cls_node else [])
                   if isinstance(n, ast.FunctionDef) and n.name == METHOD), None)
        if fn is None:
            return cls(path, note=f"{path} has no {CLASS}.{METHOD}: assert_close defaults for every dtype")
        lists = {}
        for node in cls_node.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    lists[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue  # not a literal (a defaultdict, ...): _compute_tolerances does not read it
        module = ast.Module(body=[fn], type_ignores=[])
        namespace = {"torch": torch}
        exec(compile(module, str(path), "exec"), namespace)  # the checkout's own method, run as written
        return cls(path, namespace[METHOD], lists)

    def for_op(self, info, dtype: torch.dtype) -> Tolerance:
        if self._method is None:
            return Tolerance(None, None, self.note or "assert_close defaults")
        op = SimpleNamespace(name=info.name, variant_test_name=info.variant_test_name)
        atol, rtol = self._method(SimpleNamespace(**self.lists), op, dtype)
        label = TEST_MPS if self.path is not None and self.path.as_posix().endswith(TEST_MPS) else self.path
        where = f"{label} {CLASS}.{METHOD}({info.name!r}, {str(dtype).removeprefix('torch.')})"
        if atol is None and rtol is None:
            return Tolerance(None, None, f"assert_close defaults: {where} returns (None, None)")
        listed = [name for name, members in self.lists.items()
                  if isinstance(members, (set, frozenset, list, tuple)) and info.name in members]
        why = f"; {info.name!r} is on {', '.join(listed)}" if listed else ""
        return Tolerance(atol, rtol, f"{where}{why}")
