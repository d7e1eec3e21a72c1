"""Put MPS on every row of an op family in native_functions.yaml, surgically.

Rules (see design/pytorch-mps.md section 1):
- a row with `structured_delegate` inherits its delegate's backends: untouched;
- a composite row (CompositeExplicit/ImplicitAutograd, or no dispatch) already runs on MPS;
- a row whose CUDA kernel is shared with CPU gets `MPS` added to that shared line
  (right after `CUDA`, the order PyTorch uses: `CPU, CUDA, MPS, MTIA`);
- a row with no shared kernel gets a new `MPS: <kernel>_mps` line after its CUDA/CPU line;
- `migrate`: a row with a legacy `MPS: foo_out_mps` line whose CPU/CUDA kernel is shared
  loses that line and MPS joins the shared line.
Only those lines change; the result is re-parsed by torchgen before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torchgen.model import DispatchKey

from ..errors import AtenError
from ..model.native_functions import DispatchRow, Entry, NativeFunctions
from .fileops import FileChange, edit_lines

# Keys after which MPS is placed on a shared line, in order of preference.
MPS_AFTER = ("CUDA", "CPU")


@dataclass
class RowAction:
    entry: str
    line: int  # 1-based line of the entry
    action: str  # shared, new-line, inherits, composite, already, migrated, kept, missing
    detail: str = ""


@dataclass
class DispatchPlan:
    change: FileChange
    actions: list[RowAction] = field(default_factory=list)
    legacy_kernels: list[str] = field(default_factory=list)  # migrate: implementations to delete


def _with_mps(keys: tuple[str, ...]) -> tuple[str, ...]:
    for anchor in MPS_AFTER:
        if anchor in keys:
            i = keys.index(anchor) + 1
            return keys[:i] + ("MPS",) + keys[i:]
    return keys + ("MPS",)


def _shared_row(entry: Entry) -> DispatchRow | None:
    """The CPU/CUDA row that MPS can join (CUDA's kernel also serves another backend)."""
    row = entry.row_for("CUDA") or entry.row_for("CPU")
    if row is None:
        return None
    others = [k for k in row.keys if k not in ("MPS",)]
    return row if len(others) >= 2 and ("CUDA" in others and "CPU" in others) else None


def _new_kernel_name(entry: Entry) -> str:
    row = entry.row_for("CUDA") or entry.row_for("CPU")
    base = row.kernel if row else entry.fn.func.name.unambiguous_name()
    return re.sub(r"_(cuda|cpu)$", "", base) + "_mps"


def plan_add(nf: NativeFunctions, op: str, shared: bool = True) -> DispatchPlan:
    """MPS for every row; `shared=False` (custom kernels) gives each row its own `MPS:` line."""
    replace: dict[int, str] = {}
    insert: dict[int, list[str]] = {}
    actions = []
    for entry in nf.family(op):
        fn = entry.fn
        if fn.structured_delegate is not None:
            actions.append(RowAction(entry.name, entry.line, "inherits", str(fn.structured_delegate)))
        elif entry.composite:
            actions.append(RowAction(entry.name, entry.line, "composite"))
        elif entry.row_for("MPS") is not None:
            actions.append(RowAction(entry.name, entry.line, "already", entry.row_for("MPS").kernel))
        elif shared and (row := _shared_row(entry)) is not None:
            replace[row.index] = row.render(_with_mps(row.keys))
            actions.append(RowAction(entry.name, entry.line, "shared", row.kernel))
        elif entry.rows:
            anchor = (entry.row_for("CUDA") or entry.row_for("CPU") or entry.rows[-1])
            kernel = _new_kernel_name(entry)
            insert.setdefault(anchor.index, []).append(f"{anchor.indent}MPS: {kernel}")
            actions.append(RowAction(entry.name, entry.line, "new-line", kernel))
        else:
            raise AtenError(f"cannot place MPS on '{entry.name}': it has a dispatch: block with no rows",
                            nf.path, entry.line)
    return _finish(nf, op, replace, insert, set(), actions, [], require_all=True)


def plan_migrate(nf: NativeFunctions, op: str) -> DispatchPlan:
    replace: dict[int, str] = {}
    delete: set[int] = set()
    actions, legacy = [], []
    for entry in nf.family(op):
        mps = entry.row_for("MPS")
        if mps is None:
            if not (entry.composite or entry.fn.structured_delegate is not None):
                actions.append(RowAction(entry.name, entry.line, "missing", "no MPS kernel: use `aten add`"))
            continue
        shared = _shared_row(entry)
        if mps.keys == ("MPS",) and shared is not None and "MPS" not in shared.keys:
            delete.add(mps.index)
            replace[shared.index] = shared.render(_with_mps(shared.keys))
            actions.append(RowAction(entry.name, entry.line, "migrated", f"{mps.kernel} -> {shared.kernel}"))
            legacy.append(mps.kernel)
        elif mps.keys == ("MPS",):
            actions.append(RowAction(entry.name, entry.line, "kept", f"{mps.kernel}: no shared CPU/CUDA kernel"))
        else:
            actions.append(RowAction(entry.name, entry.line, "already", mps.kernel))
    return _finish(nf, op, replace, {}, delete, actions, legacy, require_all=False)


def _finish(nf, op, replace, insert, delete, actions, legacy, require_all) -> DispatchPlan:
    """Apply the line edits, re-parse with torchgen, check MPS coverage of the family.

    `add` requires every row to reach MPS; `migrate` requires no row to lose it.
    """
    new_text = edit_lines(nf.text, replace, insert, delete)
    change = FileChange(nf.path, nf.text, new_text)
    if change.changed:
        edited = NativeFunctions(new_text, nf.path, nf.tags_path)  # torchgen re-parse
        had = {e.name for e in nf.family(op) if nf.effective(DispatchKey.MPS, e.fn)}
        missing = [e.name for e in edited.family(op)
                   if not (e.composite or edited.effective(DispatchKey.MPS, e.fn))
                   and (require_all or e.name in had)]
        if missing:
            raise AtenError(f"edit leaves {', '.join(missing)} without MPS", nf.path)
    return DispatchPlan(change, actions, legacy)
