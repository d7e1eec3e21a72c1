"""Put an op's functor and REGISTER_* lines into kernels/<Unary|Binary>Kernel.metal.

Where things land, as a PyTorch author would put them (model/metal_file.py gives the
layout):
- the functor (and the helpers of its --functor file) after the last functor
  defined before the file's first registration;
- its registrations after the last paragraph of one-op registration statements
  of the same REGISTER_* family (`REGISTER_FLOAT_BINARY_OP(hypot);` ...), using the
  file's own per-op macros where they fit (generate/functor.py);
- `#include`s the functor file needs, once, after the file's includes.

An op already in the file is compared with what would be written: the same
functor and the same instantiations plan no change; anything else is a different
implementation: its old items are removed, the new ones take their place, and the
change is marked `replaces` (add.py writes it only with --force).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import AtenError
from ..generate.functor import KernelSpec, registration_statements
from ..model.arity import ARITY
from ..model.metal_file import Item, MetalFile, split_items
from .fileops import FileChange, read_or_none

HEADER = """\
#include <c10/metal/indexing.h>
#include <c10/metal/special_math.h>
#include <c10/metal/utils.h>
#include <metal_stdlib>
using namespace metal;
using namespace c10::metal;
"""


@dataclass
class OpItems:
    """What of one op a kernels file already holds."""

    functor: list[Item]  # the functor struct and the helpers the new source also defines
    registrations: list[Item]  # statements instantiating this op only
    shared: list[Item]  # statements instantiating this op among others (multi-op macros)
    leaves: list[tuple]  # REGISTER_* arguments of every instantiation of the op


def _norm(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def _source_parts(source: str):
    """(include lines, using lines, functor block text, its items) of a --functor source.

    The block is the source without its #include and `using` lines (they go to the
    file's header once); comments stay where they were, so the block splits into the
    same items here as it does once written into the kernels file.
    """
    lines = source.splitlines()
    items = split_items(source)
    header = [it for it in items if it.kind in ("include", "using")]
    dropped = {n for it in header for n in range(it.code, it.last + 1)}
    for n in sorted(dropped):  # and the blank lines right after them
        k = n + 1
        while k < len(lines) and not lines[k].strip():
            dropped.add(k)
            k += 1
    block = "\n".join(line for n, line in enumerate(lines) if n not in dropped).strip("\n")
    includes = [it.code_text.strip() for it in header if it.kind == "include"]
    usings = [it.code_text.strip() for it in header if it.kind == "using"]
    return includes, usings, block, split_items(block)


def _matches(item: Item, new: Item) -> bool:
    if item.kind != new.kind or item.name is None:
        return False
    return item.args == new.args if item.kind == "invocation" else item.name == new.name


def find_op(mf: MetalFile, kernel: str, body: list[Item]) -> OpItems:
    functor = [it for it in mf.items
               if it.kind in ("definition", "invocation") and not mf.leaves(it.code_text)
               and (it.name == f"{kernel}_functor" or any(_matches(it, b) for b in body))]
    own, shared, leaves = [], [], []
    for item, item_leaves in mf.registrations():
        mine = [l for l in item_leaves if l.belongs_to(kernel)]
        if not mine:
            continue
        (own if len(mine) == len(item_leaves) else shared).append(item)
        leaves += [l.args or l.host_names for l in mine]
    return OpItems(functor, own, shared, sorted(leaves))


def _functor_anchor(mf: MetalFile) -> Item | None:
    """The last functor defined before the first registration (else the item before it)."""
    regs = [it for it, _ in mf.registrations()]
    if not regs:
        return mf.items[-1] if mf.items else None
    before = [it for it in mf.items if it.last < regs[0].first]
    functors = [it for it in before if (it.kind == "definition" and (it.name or "").endswith("_functor"))
                or (it.kind == "invocation" and (it.name or "").startswith("DEFINE_"))]
    return (functors or before or [None])[-1]


def _registration_anchor(mf: MetalFile, register_macro: str) -> tuple[Item | None, bool]:
    """Where the op's registrations go, and whether they form a paragraph of their own.

    Registrations not parted by a blank line are a paragraph. The anchor is the last
    statement of `register_macro`'s family in the last paragraph made only of one-op
    statements (`REGISTER_FLOAT_BINARY_OP(hypot);`, `REGISTER_UNARY_OP(neg, int, int);`)
    that has such a statement. A paragraph listing several ops is extended in place;
    after a one-op paragraph the new op starts its own, as the file does.
    """
    paragraphs: list[list[tuple[Item, list]]] = []
    previous = None
    for item, leaves in mf.registrations():
        if previous is None or item.first != previous.last + 1:
            paragraphs.append([])
        paragraphs[-1].append((item, leaves))
        previous = item

    def one_op(item, leaves):
        return item.kind == "invocation" and bool(item.args) and all(l.family == item.args[0] for l in leaves)

    def ours(leaves):
        return all(l.macro == register_macro for l in leaves)

    qualifying = [p for p in paragraphs if all(one_op(*entry) for entry in p) and any(ours(l) for _, l in p)]
    if qualifying:
        paragraph = qualifying[-1]
        anchor = [item for item, leaves in paragraph if ours(leaves)][-1]
        return anchor, len({item.args[0] for item, _ in paragraph}) == 1
    return (paragraphs[-1][-1][0] if paragraphs else None), True


class _Edit:
    """Line edits on the original text: removals and blocks inserted before a line index."""

    def __init__(self, text: str):
        self.lines = text.splitlines()
        self.removed: set[int] = set()
        self.blocks: dict[int, list[tuple[list[str], bool]]] = {}

    def remove(self, item: Item) -> None:
        self.removed.update(range(item.first, item.last + 1))
        n = item.last + 1
        while n < len(self.lines) and not self.lines[n].strip():  # the blank lines after it
            self.removed.add(n)
            n += 1

    def insert(self, before: int, block: str, separate: bool = True) -> None:
        self.blocks.setdefault(before, []).append((block.splitlines(), separate))

    def text(self) -> str:
        out: list[str] = []
        for n in range(len(self.lines) + 1):
            for block, separate in self.blocks.get(n, []):
                if separate and out and out[-1].strip():
                    out.append("")
                out += block
                following = next((self.lines[k] for k in range(n, len(self.lines)) if k not in self.removed),
                                 None)
                if separate and following is not None and following.strip():
                    out.append("")
            if n < len(self.lines) and n not in self.removed:
                out.append(self.lines[n])
        while out and not out[-1].strip():
            out.pop()
        return "\n".join(out) + "\n"


def _after(item: Item | None) -> int:
    return item.last + 1 if item is not None else 0


def plan_metal(kernels_dir: Path, c10_metal: Path, spec: KernelSpec, functor_source: str) -> FileChange:
    path = Path(kernels_dir) / ARITY[spec.arity].kernel_file
    old = read_or_none(path)
    text = old if old is not None else HEADER
    mf = MetalFile(text, c10_metal)
    includes, usings, block, body = _source_parts(functor_source)
    if not body:
        raise AtenError(f"the functor source for '{spec.name}' holds no definitions")
    per_name = [(m.name, {(l.args[1], l.args[2]) for l in leaves})
                for m, leaves in mf.per_name_macros(ARITY[spec.arity].register_macro)]
    statements = registration_statements(spec, per_name)
    planned = sorted(l.args for s in statements for l in mf.leaves(s))
    existing = find_op(mf, spec.name, body)
    present = existing.functor or existing.registrations or existing.shared
    if present and ([_norm(it.text) for it in existing.functor] == [_norm(it.text) for it in body]
                    and existing.leaves == planned):
        return FileChange(path, old, text)

    edit = _Edit(text)
    missing_includes = [i for i in includes if i not in {it.code_text.strip() for it in mf.items}]
    missing_usings = [u for u in usings if u not in {it.code_text.strip() for it in mf.items}]
    include_items = [it for it in mf.items if it.kind == "include"]
    using_items = [it for it in mf.items if it.kind == "using"] or include_items
    if missing_includes:
        edit.insert(_after(include_items[-1] if include_items else None), "\n".join(missing_includes), False)
    if missing_usings:
        edit.insert(_after(using_items[-1] if using_items else None), "\n".join(missing_usings), False)
    if existing.shared:
        where = ", ".join(f"line {it.code + 1}" for it in existing.shared)
        raise AtenError(f"'{spec.name}' is also instantiated by statements shared with other ops ({where}); "
                        "edit those by hand", path)
    for item in existing.functor + existing.registrations:
        edit.remove(item)
    functor_at = existing.functor[0].first if existing.functor else _after(_functor_anchor(mf))
    anchor, own_paragraph = _registration_anchor(mf, ARITY[spec.arity].register_macro)
    if existing.registrations:
        regs_at, own_paragraph = existing.registrations[0].first, True
    else:
        regs_at = _after(anchor) if anchor is not None else functor_at
    edit.insert(functor_at, block)
    edit.insert(regs_at, "\n".join(statements), separate=own_paragraph)
    return FileChange(path, old, edit.text(), replaces=bool(present))
