"""Edit torch/testing/_internal/common_mps.py once an op has a kernel.

Only the op's entries in UNIMPLEMENTED_XFAILLIST ("no MPS kernel") become wrong
when the kernel lands, so only those are edited: an entry for every dtype (None) or
for dtypes all now instantiated is deleted, one listing other dtypes too keeps
those. Every other entry of the op (skips for crashes, precision xfails, ...) was
recorded for a reason a kernel does not settle: it is returned for review, never
deleted.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import torch

from ..errors import AtenError
from ..model.common_mps import CommonMps, ListEntry
from .fileops import FileChange

UNIMPLEMENTED = "UNIMPLEMENTED_XFAILLIST"


@dataclass(frozen=True)
class TestListPlan:
    change: FileChange
    removed: list[ListEntry]  # deleted or narrowed UNIMPLEMENTED_XFAILLIST entries
    narrowed: dict[str, str]  # key -> the dtype list left in place
    review: list[ListEntry]  # every other entry of the op, untouched


def _listed_dtypes(entry: ListEntry, path) -> list[torch.dtype] | None:
    if entry.value.strip() == "None":
        return None
    try:
        node = ast.parse(entry.value.strip(), mode="eval").body
        names = [f"{n.value.id}.{n.attr}" for n in node.elts]
        return [getattr(torch, name.split(".", 1)[1]) for name in names if name.startswith("torch.")]
    except (SyntaxError, AttributeError, TypeError):
        raise AtenError(f"cannot read the dtype list of '{entry.key}' in {entry.list_name}", path,
                        entry.start) from None


def plan_removal(common: CommonMps, keys, instantiated) -> TestListPlan:
    keys = set(keys)
    hits = common.lookup(keys)
    lines = common.text.splitlines(keepends=True)
    replace: dict[int, str] = {}
    drop: set[int] = set()
    removed, narrowed, review = [], {}, []
    for e in hits:
        if e.list_name != UNIMPLEMENTED:
            review.append(e)
            continue
        first, last = lines[e.start - 1], lines[e.end - 1]
        # Only whole-line entries are edited (the file's formatting style).
        if not first.lstrip().startswith(("'", '"')) or not last.rstrip().endswith(","):
            raise AtenError(f"entry '{e.key}' shares its line with other code; edit it by hand",
                            common.path, e.start)
        listed = _listed_dtypes(e, common.path)
        left = [] if listed is None else [d for d in listed if d not in set(instantiated)]
        drop.update(range(e.start - 1, e.end))
        removed.append(e)
        if left:
            indent = first[:len(first) - len(first.lstrip())]
            value = "[" + ", ".join(str(d) for d in left) + "]"
            replace[e.start - 1] = f"{indent}{first.strip().split(':', 1)[0]}: {value},\n"
            narrowed[e.key] = value
    out = []
    for i, line in enumerate(lines):
        if i in replace:
            out.append(replace[i])
        elif i not in drop:
            out.append(line)
    return TestListPlan(FileChange(common.path, common.text, "".join(out)), removed, narrowed, review)
