"""`aten migrate`: collapse legacy `MPS: foo_out_mps` rows into the shared line.

The MPSGraph-era style registered a separate MPS kernel; native Metal puts MPS on
the CPU/CUDA line and registers a stub. Every row of the family is handled (a
row left behind keeps the old path silently). The old implementations are
located in the operations/*.mm files so they can be deleted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .edit.dispatch import RowAction, plan_migrate as plan_dispatch
from .edit.fileops import FileChange
from .model.native_functions import NativeFunctions
from .model.tree import PyTorchTree


@dataclass
class MigratePlan:
    op: str
    change: FileChange
    actions: list[RowAction]
    legacy: list[tuple[str, list[str]]]  # kernel -> ["file:line", ...]

    def to_json(self, tree: PyTorchTree) -> dict:
        return {
            "op": self.op,
            "dispatch": [vars(a) for a in self.actions],
            "files": [tree.relative(self.change.path)] if self.change.changed else [],
            "delete": [{"kernel": k, "defined_at": where} for k, where in self.legacy],
        }


def find_definitions(operations_dir: Path, kernel: str, root: PyTorchTree) -> list[str]:
    pattern = re.compile(rf"(TORCH_IMPL_FUNC\(\s*{re.escape(kernel)}\s*\)|"
                         rf"^[\w:<>&\s\*]*\b{re.escape(kernel)}\s*\([^;]*$)")
    hits = []
    for path in sorted(Path(operations_dir).glob("*.mm")):
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{root.relative(path)}:{n}")
    return hits


def plan(tree: PyTorchTree, op: str) -> MigratePlan:
    nf = NativeFunctions.load(tree.native_functions, tree.tags)
    dispatch = plan_dispatch(nf, op)
    legacy = [(k, find_definitions(tree.operations_dir, k, tree)) for k in dispatch.legacy_kernels]
    return MigratePlan(op, dispatch.change, dispatch.actions, legacy)
