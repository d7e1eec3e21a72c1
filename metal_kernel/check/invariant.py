"""Whether a kernel's threadgroup memory behaves alike in every threadgroup
of one kind: then the threadgroup checks of one group of each kind stand for
all the others (check/session.py runs the rest with those checks off,
mk/check.h Dispatch::phase).

Threadgroup memory is private to a group, so its findings (out of bounds,
races, uninitialised reads) come from what one group does alone: which of
its threads reach which threadgroup access, at which address, between which
barriers. That is a function of the thread's position in its group and of
values every group sees alike, unless something group-specific steers it:
the group's position (``threadgroup_position_in_grid``, ``gid``), or a value
read from memory that differs between groups. This pass follows such
*group-variant* values through the per-thread function's SSA graph, telling
apart those that are functions of the group's position only (POSITION) from
those read from memory (DATA), and accepts the kernel when

- every branch and switch condition is group-invariant, or is an *edge
  condition*: a comparison (a `br` on an `icmp`) of POSITION values, such as
  `gid < n` (check/prove.py group_kinds sorts a dispatch's groups by the
  outcome each edge condition has for all, none or some of their threads,
  from its polynomials; instrument.py records them);
- every threadgroup access's address (and a memory copy's length) is
  group-invariant;
- no access goes through a pointer of unknown origin (it might be
  threadgroup memory), and no call the pass does not know is handed a
  threadgroup pointer.

Group-invariant sources: the thread's position in its group, the group's
shape (a partial group at the grid's edge is a kind of its own), the grid's,
constants, and loads at invariant addresses from memory the kernel never
writes (its read-only buffers and program-scope constants). Everything else
loaded is DATA: device memory the kernel writes, threadgroup and private
memory (simd results come back through private memory), atomics, and any
load at a group-variant address (x[gid] is no function of gid to follow).

The values a group stores are not followed: they differ, and a store that
leaves memory as it was is no access for racecheck (mk/check.h *_st). In the
representatives such a store that another thread's access touches in the
same epoch, or that would race as a write, sends every group to be checked
whole (mk/check.h TgEntry::sw), as does any finding of theirs.
"""

from __future__ import annotations

import re

from ..runtime.ir import _DEF, Unsupported, _name, _split_top, parse_call
from .roots import _DBG_STRIP, Function, _operand_value

# mk/workitem/group.h WiGroup: bytes [12, 36) are threadgroup_position and base
# (threadgroup_position * threads_per_threadgroup), the group's place in the
# grid. Before them: the group's actual shape; after: the dispatch's shapes,
# then the object pointer tables (tg_allocs at 80 on).
_GROUP_POSITION = (12, 36)
# mk/abi.h GroupInfo (CUDA's blockIdx, blockDim, gridDim): bytes [0, 12) are
# the group's position; CUDA blocks are never partial.
_GROUP_INFO_POSITION = (0, 12)
_LOCAL = re.compile(r"%[-\w.$]+")
_MARKERS = {"__mk_chk_buffer", "__mk_chk_tgparam", "__mk_tg_alloc", "__mk_sync_barrier", "__mk_sync_simd",
            "__mk_thread_index"}  # the thread's index in its group
_TG_KINDS = ("tg", "tgp")


def tg_invariant(fn: Function, tg_accesses: list[tuple[str, str]], unknown_access: bool,
                 written: set[int], writes_unknown: bool) -> tuple[str, list[str]]:
    """('', edge conditions) when the threadgroup behaviour of `fn` is the same
    in every group of one shape and the same outcome of its edge conditions,
    else (the first reason it may not be, []).

    Edge conditions are comparisons a branch takes on values that depend on
    the group's position but not on memory (`if (gid < n)`): check/session.py
    finds which groups they split, from their polynomials.
    `tg_accesses`: (pointer, length or '') of each threadgroup access;
    `unknown_access`: an access through a pointer of unknown origin;
    `written`: the buffers the kernel may write."""
    if unknown_access:
        return "an access through a pointer of unknown origin", []
    if not tg_accesses:
        return "no threadgroup memory", []
    level = _variant_values(fn, written, writes_unknown)
    edges: list[str] = []
    for ln in fn.lines[1:-1]:
        body = _DBG_STRIP.sub("", ln).strip()
        if body.startswith(("br i1 ", "switch ")):
            cond = _LOCAL.findall(body.split(",", 1)[0])
            worst = max((level.get(v, INVARIANT) for v in cond), default=INVARIANT)
            if worst == POSITION and body.startswith("br i1 ") and \
                    _DBG_STRIP.sub("", fn.defs.get(cond[0], "")).startswith("icmp "):
                edges.append(cond[0])
            elif worst != INVARIANT:
                return f"a branch on a group-variant value ({cond[0]})", []
        elif body.startswith(("indirectbr", "invoke", "callbr")):
            return f"unsupported control flow ({body.split()[0]})", []
        else:
            why = _call_problem(fn, body)
            if why:
                return why, []
    for ptr, length in tg_accesses:
        for v in _LOCAL.findall(ptr) + _LOCAL.findall(length):
            if level.get(v, INVARIANT) != INVARIANT:
                return f"a threadgroup address that depends on a group-variant value ({v})", []
    return "", sorted(set(edges))


def _call_problem(fn: Function, body: str) -> str:
    """Why a call may break the invariance: an unknown function given a
    threadgroup (or unknown) pointer could touch threadgroup memory unseen."""
    text = body[_DEF.match(body).end():].strip() if _DEF.match(body) else body
    if not re.match(r"(tail |musttail |notail )?call\b", text):
        return ""
    try:
        c = parse_call(text)
    except Unsupported:
        return "a call the pass cannot read"
    name = _name(c.callee) if c.callee.startswith("@") else ""
    if name in _MARKERS or name.startswith("llvm."):
        return ""
    for ty, v in c.args:
        if ty.strip().startswith("ptr") and fn.root(_operand_value(v)).kind in (*_TG_KINDS, "unknown"):
            return f"a call to {name or 'a function pointer'} with a threadgroup pointer"
    return ""


# How a value may differ between two groups of one shape: not at all, as a
# function of the group's position only (`gid`, `n - gid`), or in any way
# (read from memory the kernel writes, or at an address that depends on the
# position: x[gid] is no function of gid the pass could follow).
INVARIANT, POSITION, DATA = 0, 1, 2


def _variant_values(fn: Function, written: set[int], writes_unknown: bool) -> dict[str, int]:
    """The SSA values of `fn` that may differ between two groups of one
    shape, with how (a fixed point: phis of loops see their back edges)."""
    defs = {name: _DBG_STRIP.sub("", text) for name, text in fn.defs.items()}
    level: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for name, d in defs.items():
            new = _level(fn, d, level, written, writes_unknown)
            if new > level.get(name, INVARIANT):
                level[name] = new
                changed = True
    return level


def _level(fn: Function, d: str, level: dict[str, int], written: set[int], writes_unknown: bool) -> int:
    def worst(text: str) -> int:
        return max((level.get(v, INVARIANT) for v in _LOCAL.findall(text)), default=INVARIANT)

    op = d.split(None, 1)[0] if d else ""
    if op == "load":
        parts = _split_top(re.sub(r"^load\s+(atomic\s+)?(volatile\s+)?", "", d))
        if len(parts) < 2 or re.match(r"load\s+(atomic|volatile)", d):
            return DATA
        ptr = _operand_value(parts[1])
        if worst(ptr) != INVARIANT:
            return DATA
        return _memory_level(fn, ptr, parts[0].strip(), written, writes_unknown)
    if op in ("atomicrmw", "cmpxchg", "va_arg", "landingpad"):
        return DATA
    if op in ("call", "tail", "musttail", "notail"):
        try:
            c = parse_call(d)
        except Unsupported:
            return DATA
        name = _name(c.callee) if c.callee.startswith("@") else ""
        if name in _MARKERS:
            return INVARIANT  # object bases: the same object in every group
        if name.startswith("llvm.") and not re.match(r"llvm\.(memcpy|memmove|memset|read|experimental)", name):
            return max((worst(arg) for _, arg in c.args), default=INVARIANT)
        return DATA
    # Arithmetic, comparisons, casts, getelementptr, phi, select, vector and
    # aggregate operations: as their worst operand (block labels in a phi
    # are not values, and never variant).
    return worst(d)


def _memory_level(fn: Function, ptr: str, ty: str, written: set[int], writes_unknown: bool) -> int:
    """What a load through `ptr` (an invariant address) reads: the same in
    every group from memory the kernel never writes and from the WiGroup's
    and group record's shapes, the group's position from their position
    fields, anything from the rest."""
    root = fn.root(ptr)
    if root.kind == "buf":
        return INVARIANT if root.index not in written and not writes_unknown else DATA
    if root.kind == "glob":
        return INVARIANT if re.search(r"\bconstant\b", fn.globals.get(_name(root.base), "")) else DATA
    if root.kind in ("g", "groupinfo"):
        off = _record_offset(fn, ptr, root.kind)
        if off is None:
            return DATA
        size = fn.layout.store_size(ty) if ty else 8
        lo, hi = _GROUP_POSITION if root.kind == "g" else _GROUP_INFO_POSITION
        return INVARIANT if off + size <= lo or off >= hi else POSITION
    return DATA


def _record_offset(fn: Function, ptr: str, kind: str) -> int | None:
    """The constant byte offset of `ptr` into the WiGroup (`g`) or the group
    record (`groupinfo`: a __mk_tg_alloc of it), or None."""
    def is_base(v: str) -> bool:
        if kind == "g":
            return v == fn.g
        return bool(re.search(r"call .*@__mk_tg_alloc\(i32 (?:noundef )?-1,", fn.defs.get(v, "")))
    if is_base(ptr):
        return 0
    d = _DBG_STRIP.sub("", fn.defs.get(ptr, ""))
    m = re.match(r"getelementptr\s+(?:(?:inbounds|nuw|nusw)\s+)*i8,\s*ptr\s+(%[-\w.$]+),\s*i64\s+(-?\d+)$", d)
    if m and is_base(m.group(1)):
        return int(m.group(2))
    return None
