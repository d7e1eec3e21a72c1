"""Edit torch/testing/_internal/common_mps.py: drop an op's entries once it has a kernel."""

from __future__ import annotations

from ..errors import AtenError
from ..model.common_mps import CommonMps, ListEntry
from .fileops import FileChange


def plan_removal(common: CommonMps, keys) -> tuple[FileChange, list[ListEntry]]:
    """Delete the lines of every entry whose key is in `keys`."""
    hits = common.lookup(keys)
    lines = common.text.splitlines(keepends=True)
    drop = set()
    for e in hits:
        first = lines[e.start - 1]
        last = lines[e.end - 1]
        # Only whole-line entries are removed (the file's formatting style).
        if not first.lstrip().startswith(("'", '"')) or not last.rstrip().endswith(","):
            raise AtenError(f"entry '{e.key}' shares its line with other code; edit it by hand",
                            common.path, e.start)
        drop.update(range(e.start - 1, e.end))
    new = "".join(line for i, line in enumerate(lines) if i not in drop)
    return FileChange(common.path, common.text, new), hits
