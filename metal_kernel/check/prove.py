"""What a dispatch's geometry proves about a kernel before it runs
(check/affine.py): which buffers only ever get bytes of their own per thread
(no race possible, so no shadow), and whether the whole dispatch can produce
no finding at all (then it runs in the ordinary build)."""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass, field

from .affine import INTERVAL_SYMBOLS, Evaluator, Geometry, from_json

# Kernel features whose findings the polynomials cannot rule out.
UNPROVABLE_USES = {"threadgroup", "private", "unknown", "atomic", "sync"}
# Those that checking a few groups (check/invariant.py) does not cover.
DEVICE_UNPROVABLE_USES = {"private", "unknown", "simd"}


@dataclass
class Proof:
    whole: bool = False  # no finding is possible: run the ordinary build
    # No finding is possible in device memory or constants, nor in private
    # arrays or simd functions: only threadgroup memory and barriers are left.
    device: bool = False
    exclusive: set = field(default_factory=set)  # written buffers no two threads share a byte of
    inside: set = field(default_factory=set)  # buffers every access to is proven in bounds and aligned


def read_scalar(ptrs, sizes, b: int, off: int, ty: str) -> int | None:
    """The integer of type `ty` at byte `off` of buffer `b`, or None."""
    nbytes = {"i8": 1, "i16": 2, "i32": 4, "i64": 8}.get(ty)
    if nbytes is None or b >= len(ptrs) or not ptrs[b] or off < 0 or off + nbytes > sizes[b]:
        return None
    return int.from_bytes(ctypes.string_at(ptrs[b] + off, nbytes), "little")


def _scalar(ptrs, sizes, reads: list | None = None):
    def read(b: int, off: int, ty: str):
        value = read_scalar(ptrs, sizes, b, off, ty)
        if reads is not None:
            reads.append((b, off, ty, value))
        return value
    return read


def _evaluator(facts: dict, grid, group, ngroups, ptrs, sizes, reads: list | None = None) -> Evaluator:
    return Evaluator(Geometry(list(grid), list(group), list(ngroups)), _scalar(ptrs, sizes, reads),
                     facts.get("loops"), facts.get("bounded"))


def prove(facts: dict, grid, group, ngroups, ptrs, sizes, spans) -> Proof:
    proof = Proof()
    accesses = facts.get("accesses")
    if accesses is None or facts.get("writes_unknown"):
        return proof
    ev = _evaluator(facts, grid, group, ngroups, ptrs, sizes)
    safe = True
    per_buffer: dict[int, list] = {}
    shared: set[int] = set()  # buffers with an access that is not a known polynomial
    outside: set[int] = set()  # buffers with an access not proven in bounds
    for a in accesses:
        off = a.get("offset")
        lin = None
        known = []
        if off is not None and a["size"]:
            lin = ev.linear(from_json(off["poly"]))
            known = ev.constraints(a.get("guards", [])) if lin is not None else []
            if lin is not None and not all(ev.in_range(from_json(p), lo, hi, known) for p, lo, hi in off["ranges"]):
                lin = None
        if a["root"] == "buf":
            if lin is None:
                shared.add(a["index"])
            else:
                per_buffer.setdefault(a["index"], []).append((lin, a["size"], known, a["write"]))
        if lin is None or not _inside(ev, lin, known, a, ptrs, spans):
            safe = False
            if a["root"] == "buf":
                outside.add(a["index"])
    written = {b for b, parts in per_buffer.items() if any(w for *_, w in parts)}
    written |= {a["index"] for a in accesses if a["root"] == "buf" and a["write"]}
    for b in written:
        if b not in shared and ev.exclusive([(lin, size, known) for lin, size, known, _ in per_buffer.get(b, [])]):
            proof.exclusive.add(b)
    uses = set(facts.get("uses", []))
    if "unknown" not in uses:
        proof.inside = {a["index"] for a in accesses if a["root"] == "buf"} - outside
    proof.device = safe and not (uses & DEVICE_UNPROVABLE_USES) and written <= proof.exclusive
    proof.whole = proof.device and not (uses & UNPROVABLE_USES)
    return proof


def _inside(ev: Evaluator, lin: dict, known: list, a: dict, ptrs, spans) -> bool:
    """Whether every thread that makes the access stays inside its object,
    aligned."""
    size, align = a["size"], max(1, a["align"])
    lo, hi = ev.bounds(lin, known)
    if a["root"] == "glob":
        first, last = 0, a["object_size"] - size
        base = 0
    else:
        b = a["index"]
        if b >= len(ptrs) or not ptrs[b]:
            return False
        start, n = spans[b]
        base = ptrs[b]
        first, last = start - base, start + n - base - size
    if lo < first or hi > last:
        return False
    if any(c % align for k, c in lin.items() if k) or (base + lin.get("", 0)) % align:
        return False
    return True


def stores_in_bounds(facts: dict, grid, group, ngroups, ptrs, sizes, reads: list | None = None) -> bool:
    """Whether every store the kernel makes to a buffer stays inside the
    bytes bound to it ([ptr, ptr + size)) for every thread of this dispatch:
    then the runtime runs it unguarded (runtime/store_guard.py). `reads`
    collects (buffer, offset, type, value) of each scalar the proof read."""
    accesses = facts.get("accesses")
    if accesses is None or facts.get("writes_unknown"):
        return False
    ev = _evaluator(facts, grid, group, ngroups, ptrs, sizes, reads)
    spans = [(p, n) for p, n in zip(ptrs, sizes)]
    for a in accesses:
        if not a["write"] or a["root"] != "buf":
            continue
        off = a.get("offset")
        if off is None or not a["size"]:
            return False
        lin = ev.linear(from_json(off["poly"]))
        if lin is None:
            return False
        known = ev.constraints(a.get("guards", []))
        if not all(ev.in_range(from_json(p), lo, hi, known) for p, lo, hi in off["ranges"]):
            return False
        if not _inside(ev, lin, known, a, ptrs, spans):
            return False
    return True


def group_kinds(facts: dict, grid, group, ngroups, ptrs, sizes, limit: int) -> list[int] | None:
    """One group of each kind a dispatch has (linear indices, x fastest), or
    None when there are more than `limit` kinds or the edge conditions
    cannot be followed here. Groups of one kind behave alike in threadgroup
    memory (check/invariant.py): the same shape (the last group along an
    axis the grid does not divide is partial) and, for each edge condition
    (`if (gid < n)`), the same outcome for every thread of the group. A group
    where an edge condition goes both ways is a kind of its own."""
    import numpy as np

    if not facts.get("edges"):  # the shapes alone: the first group and the partial last ones
        per_axis = [[0, ngroups[d] - 1] if group[d] and grid[d] % group[d] and ngroups[d] > 1 else [0]
                    for d in range(3)]
        return [x + ngroups[0] * (y + ngroups[1] * z) for z in per_axis[2] for y in per_axis[1] for x in per_axis[0]]
    ev = _evaluator(facts, grid, group, ngroups, ptrs, sizes)
    # Per axis: one row of codes per group index (its shape, then each edge
    # condition's outcome: 0 false, 1 true, 2 + t both ways).
    codes = []
    for d in range(3):
        shape = np.zeros(ngroups[d], dtype=np.int64)
        if group[d] and grid[d] % group[d]:
            shape[-1] = 1  # the partial group
        codes.append([shape])
    for edge in facts.get("edges", []):
        outcome = _edge_outcomes(ev, edge, grid, group, ngroups)
        if outcome is None:
            return None
        d, row = outcome
        if d >= 0:
            codes[d].append(row)
    per_axis = []
    for d in range(3):
        rows = np.stack(codes[d], axis=1)
        mixed = np.nonzero((rows >= 2).any(axis=1))[0]  # a kind each
        if len(mixed) > limit:
            return None
        key = (np.minimum(rows, 2) << np.arange(0, 2 * rows.shape[1], 2)).sum(axis=1)
        key[mixed] = -1
        first = {int(i) for i in mixed}
        for k in np.nonzero(np.bincount(key[key >= 0]))[0]:
            first.add(int(np.argmax(key == k)))
        per_axis.append(sorted(first))
    if math.prod(len(a) for a in per_axis) > limit:
        return None
    return [x + ngroups[0] * (y + ngroups[1] * z) for z in per_axis[2] for y in per_axis[1] for x in per_axis[0]]


_HOLDS = {"ult": lambda v: v < 0, "slt": lambda v: v < 0, "ule": lambda v: v <= 0, "sle": lambda v: v <= 0,
          "ugt": lambda v: v > 0, "sgt": lambda v: v > 0, "uge": lambda v: v >= 0, "sge": lambda v: v >= 0}


def _edge_outcomes(ev: Evaluator, edge: dict, grid, group, ngroups):
    """(axis, each group index's outcome code) of one edge condition, (-1,
    None) when it does not depend on the group here, None when it cannot be
    followed: not linear, over more than one axis's group index, or its
    sides could wrap at the comparison's width."""
    import numpy as np

    sides = []
    for key in ("lhs", "rhs"):
        off = edge[key]
        lin = ev.linear(from_json(off["poly"]))
        if lin is None or not all(ev.in_range(from_json(p), lo, hi) for p, lo, hi in off["ranges"]):
            return None
        sides.append(lin)
    bits, pred = edge["bits"], edge["pred"]
    low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if pred[0] == "s" else (0, 1 << bits)
    for lin in sides:
        lo, hi = ev.extremes(lin)
        if lo < low or hi >= high or max(-lo, hi) >= 1 << 62:  # (62: the arithmetic below is int64)
            return None
    form = dict(sides[0])
    for k, v in sides[1].items():
        form[k] = form.get(k, 0) - v
    if any(k.startswith(INTERVAL_SYMBOLS) for k in form):
        return None  # a loop counter may start from the group's position (`for (i = gid; ...)`), a bounded value cover it
    axes = [d for d in range(3) if form.get("t" + "xyz"[d], 0)]
    if not axes:
        return -1, None
    if len(axes) > 1:
        return None
    d = axes[0]
    a = form.pop("t" + "xyz"[d])
    c = form.pop("", 0)
    lo, hi = ev.extremes({k: v for k, v in form.items() if v}) if form else (0, 0)
    t = np.arange(ngroups[d], dtype=np.int64)
    v_lo, v_hi = c + a * t + lo, c + a * t + hi
    if pred in ("eq", "ne"):
        true_all, false_all = (v_lo == 0) & (v_hi == 0), (v_lo > 0) | (v_hi < 0)
        if pred == "ne":
            true_all, false_all = false_all, true_all
    elif pred in _HOLDS:
        holds = _HOLDS[pred]
        true_all, false_all = holds(v_lo) & holds(v_hi), ~holds(v_lo) & ~holds(v_hi)
    else:
        return None
    return d, np.where(true_all, 1, np.where(false_all, 0, 2 + t))
