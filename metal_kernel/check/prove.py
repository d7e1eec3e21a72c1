"""What a dispatch's geometry proves about a kernel before it runs
(check/affine.py): which buffers only ever get bytes of their own per thread
(no race possible, so no shadow), and whether the whole dispatch can produce
no finding at all (then it runs in the ordinary build)."""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

from .affine import Evaluator, Geometry, from_json

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


def _scalar(ptrs, sizes):
    def read(b: int, off: int, ty: str):
        nbytes = {"i8": 1, "i16": 2, "i32": 4, "i64": 8}.get(ty)
        if nbytes is None or b >= len(ptrs) or not ptrs[b] or off < 0 or off + nbytes > sizes[b]:
            return None
        return int.from_bytes(ctypes.string_at(ptrs[b] + off, nbytes), "little")
    return read


def prove(facts: dict, grid, group, ngroups, ptrs, sizes, spans) -> Proof:
    proof = Proof()
    accesses = facts.get("accesses")
    if accesses is None or facts.get("writes_unknown"):
        return proof
    ev = Evaluator(Geometry(list(grid), list(group), list(ngroups)), _scalar(ptrs, sizes), facts.get("loops"))
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


def stores_in_bounds(facts: dict, grid, group, ngroups, ptrs, sizes) -> bool:
    """Whether every store the kernel makes to a buffer stays inside the
    bytes bound to it ([ptr, ptr + size)) for every thread of this dispatch:
    then the runtime runs it unguarded (runtime/store_guard.py)."""
    accesses = facts.get("accesses")
    if accesses is None or facts.get("writes_unknown"):
        return False
    ev = Evaluator(Geometry(list(grid), list(group), list(ngroups)), _scalar(ptrs, sizes), facts.get("loops"))
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
