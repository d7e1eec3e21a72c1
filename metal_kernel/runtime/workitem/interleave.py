"""Interleaving the independent floating-point chains of the loop functions'
blocks, on the optimised IR, before code generation.

Why: a jammed loop (emit_loop._jammed_rows) runs ROW_JAM rows of threads per
iteration. After inlining, unrolling and vectorising, each row is a chain of
dependent operations (``acc += As[y][k] * Bs[k][x]`` over k: sixteen FMAs of
four cycles each), and the rows' chains follow one another in the block. An
out-of-order core overlaps only the chains its scheduler holds at once: with
two FMA pipes of four cycles (AVX2 on Zen 3/4, AVX-512 on Intel's servers) it
needs eight in flight, and rows in sequence give it two (the halves of one
row). LLVM's schedulers keep that order: they minimise register pressure.
This pass orders such a block by chain position instead, the k-th operation
of every chain before the (k+1)-th of any, each load just before its first
user (benchmarks/interleave.py measures what it buys).

Sound by construction, and conservative where it cannot tell:

- SSA dependences are kept; phis stay first and the terminator last;
- two memory operations swap only when both are loads, or when their
  addresses cannot overlap: different noalias parameters of the loop
  function, different fields of its slot struct (every slot access indexes
  its own field with a thread id below the field's length, emit_steps.py),
  or a noalias parameter against memory reached through a loaded pointer
  (the loop function's noalias parameters are never stored anywhere);
- anything else that touches memory or has effects (calls other than pure
  intrinsics, atomics, volatile accesses, fences) keeps its place relative
  to every memory operation;
- a block with a line this module does not understand is left as it is.

Only blocks of ``@__mk_wiloop_*`` functions with two or more chains of at
least MIN_CHAIN floating-point operations are reordered; pass2.py runs the
pass only on modules with jammed rows (its separate optimisation step
costs ~0.2 s per library)."""

from __future__ import annotations

import heapq
import re

from ..ir import Unsupported, _split_top
from ..ir_layout import Layout
from .ir_model import NO_MEMORY_INTRINSICS

MIN_CHAIN = 8  # floating-point operations in a chain worth interleaving

_LOOP_FN = re.compile(r"^define [^@]*@__mk_wiloop_\d+\((.*)\)[^{]*\{$")
_VALUE = re.compile(r"%[-\w.$]+")
_DEF = re.compile(r"^\s*(%[-\w.$]+) = (.*)$")
_LABEL = re.compile(r"^([-\w.$]+):(\s*;.*)?$")
_NUMBERED = re.compile(r"%(\d+)\b")
_TYPE_DEF = re.compile(r"^(%[-\w.$]+) = type \{ (.*) \}$", re.MULTILINE)

# Calls without memory effects (the intrinsics an optimised kernel uses in
# arithmetic); any other call is a barrier to memory reordering.
_PURE_CALL = re.compile(rf"@llvm\.({'|'.join(NO_MEMORY_INTRINSICS)})\.")
_FP_CALL = re.compile(r"@llvm\.(fmuladd|fma)\.")
_FP_OP = re.compile(r"^(fadd|fsub|fmul)\b")
_PTR_OPERAND = re.compile(r", ptr ([%@][-\w.$]+)")
_GEP = re.compile(r"^getelementptr (?:inbounds )?(?:nuw )?(?:nusw )?(.+?), ptr (%[-\w.$]+)(.*)$")


# ------------------------------------------------------------- data layout --
def _field_ranges(layout: Layout, name: str) -> list[tuple[int, int]] | None:
    """[(start, end)] byte ranges of the struct type `name`'s fields, or None."""
    ranges = []
    try:
        body = layout.named[name]
        for k in range(len(_split_top(body.strip()[1:-1]))):
            off, member = layout.field(f"%{name}", k)
            ranges.append((off, off + layout.size_align(member)[0]))
    except (Unsupported, KeyError):
        return None
    return ranges


# ------------------------------------------------------------ memory roots --
class _Roots:
    """What memory a pointer of one loop function may reach (see the module
    doc for the rules). A root is ("param", name), ("field", k) of the slot
    struct, ("memory",) through a loaded pointer, or ("unknown",)."""

    def __init__(self, defs: dict[str, str], noalias: set[str], params: set[str], slots: str | None,
                 fields: dict[str, list[tuple[int, int]]]):
        self.defs, self.noalias, self.params, self.slots, self.fields = defs, noalias, params, slots, fields
        self.memo: dict[str, tuple] = {}

    def of(self, p: str, depth: int = 0) -> tuple:
        if p in self.memo:
            return self.memo[p]
        r = self._of(p, depth)
        self.memo[p] = r
        return r

    def _of(self, p: str, depth: int) -> tuple:
        if depth > 64:
            return ("unknown",)
        if p in self.params:
            return ("param", p) if p in self.noalias else ("unknown",)
        d = self.defs.get(p)
        if d is None:
            return ("unknown",)
        if d.startswith("load ptr, ptr ") and not re.search(r"\b(volatile|atomic)\b", d):
            return ("memory",)
        m = re.match(r"^(?:bitcast|addrspacecast) ptr (%[-\w.$]+) to ptr$", d)
        if m:
            return self.of(m.group(1), depth + 1)
        m = _GEP.match(d)
        if not m:
            return ("unknown",)
        ty, base, rest = m.groups()
        if base == self.slots:
            return self._slot_field(ty, rest)
        return self.of(base, depth + 1)

    def _slot_field(self, ty: str, rest: str) -> tuple:
        """The field of the slot struct a GEP straight off %slots starts in;
        later GEPs index within it (thread ids below its length)."""
        m = re.fullmatch(r", i64 0, i32 (\d+)(, .*)?", rest.strip().split(" !")[0])
        if m and ty in self.fields:
            return ("field", int(m.group(1)))
        m = re.fullmatch(r", i64 (\d+)", rest.strip())
        if m and ty == "i8" and self.fields:
            off = int(m.group(1))
            for k, (a, b) in enumerate(next(iter(self.fields.values()))):
                if a <= off < b:
                    return ("field", k)
        return ("param", self.slots)  # somewhere in the struct: conflicts with every field

    def disjoint(self, a: tuple, b: tuple) -> bool:
        if a[0] == "unknown" or b[0] == "unknown":
            return False
        if a[0] == "memory" or b[0] == "memory":
            return a[0] != b[0]  # loaded pointers never reach the noalias parameters
        sa = self.slots if a[0] == "field" else a[1]
        sb = self.slots if b[0] == "field" else b[1]
        if sa != sb:
            return True
        return a[0] == "field" and b[0] == "field" and a[1] != b[1]


# --------------------------------------------------------------- one block --
def _memory_kind(inst: str) -> str | None:
    """'load', 'store', 'barrier' or None (no memory effect)."""
    body = inst.split(" = ", 1)[1] if _DEF.match(inst) else inst.strip()
    if body.startswith("load "):
        return "barrier" if re.search(r"\b(volatile|atomic)\b", body) else "load"
    if body.startswith("store "):
        return "barrier" if re.search(r"\b(volatile|atomic)\b", body) else "store"
    if re.match(r"^(tail |musttail |notail )?call ", body):
        return None if _PURE_CALL.search(body) else "barrier"
    if re.match(r"^(atomicrmw|cmpxchg|fence|va_arg|invoke|landingpad|callbr)\b", body):
        return "barrier"
    return None


def _is_fp(inst: str) -> bool:
    body = inst.split(" = ", 1)[1] if " = " in inst else ""
    return bool(_FP_OP.match(body) or (re.match(r"^(tail )?call ", body) and _FP_CALL.search(body)))


def schedule_block(lines: list[str], roots: _Roots) -> list[str] | None:
    """The block's instruction lines (label excluded) in chain-interleaved
    order, or None to leave it as it is."""
    if not lines or any(not ln.strip() or ln.strip().startswith((";", "#dbg")) for ln in lines):
        return None
    phis = [ln for ln in lines if " = phi " in ln]
    if lines[:len(phis)] != phis:
        return None
    term = lines[-1]
    if not re.match(r"^\s*(br|ret|unreachable)\b", term):
        return None  # switch (several lines), invoke, ...: left alone
    body = lines[len(phis):-1]
    if not body:
        return None
    index: dict[str, int] = {}
    for i, ln in enumerate(body):
        m = _DEF.match(ln)
        if m:
            index[m.group(1)] = i
    deps: list[set[int]] = [set() for _ in body]
    for i, ln in enumerate(body):
        rhs = ln.split(" = ", 1)[1] if _DEF.match(ln) else ln
        for v in _VALUE.findall(rhs):
            j = index.get(v)
            if j is not None and j != i:
                if j > i:
                    return None  # a use before its definition: not a block this pass understands
                deps[i].add(j)
    mem: list[tuple[int, str, tuple | None]] = []
    for i, ln in enumerate(body):
        kind = _memory_kind(ln)
        if kind is None:
            continue
        root = None
        if kind in ("load", "store"):
            ptrs = _PTR_OPERAND.findall(ln)
            if not ptrs:
                return None
            root = roots.of(ptrs[-1])
        for j, kj, rj in mem:
            if kind == "load" and kj == "load":
                continue
            if "barrier" in (kind, kj) or not roots.disjoint(root, rj):
                deps[i].add(j)
        mem.append((i, kind, root))
    # Chain position: floating-point operations on the longest path here.
    depth = [0] * len(body)
    fp = [_is_fp(ln) for ln in body]
    for i in range(len(body)):
        depth[i] = max((depth[j] for j in deps[i]), default=0) + (1 if fp[i] else 0)
    longest = max(depth)
    if longest < MIN_CHAIN or sum(1 for i in range(len(body)) if fp[i] and depth[i] == longest) < 2:
        return None
    users: list[list[int]] = [[] for _ in body]
    for i, d in enumerate(deps):
        for j in d:
            users[j].append(i)
    # Each operation of a chain at its position; everything else just
    # before its first user (so loads and address arithmetic stay close to
    # where they are needed), or where it was when nothing here uses it.
    key: list[tuple[float, float]] = [(0.0, 0.0)] * len(body)
    for i in reversed(range(len(body))):
        if fp[i] or not users[i]:
            key[i] = (float(depth[i]), float(i))
        else:
            u = min(key[j] for j in users[i])
            key[i] = (u[0], u[1] - 0.5 + i * 1e-7)  # before that user, in the block's order
    waiting = [len(d) for d in deps]
    ready = [(key[i], i) for i in range(len(body)) if not waiting[i]]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in users[i]:
            waiting[j] -= 1
            if not waiting[j]:
                heapq.heappush(ready, (key[j], j))
    if len(order) != len(body) or order == list(range(len(body))):
        return None
    return phis + [body[i] for i in order] + [term]


# ---------------------------------------------------------------- a module --
def _params(sig: str) -> tuple[set[str], set[str]]:
    params, noalias = set(), set()
    for p in _split_top(sig):
        m = re.search(r"(%[-\w.$]+)$", p.strip())
        if m:
            params.add(m.group(1))
            if re.search(r"\bnoalias\b", p):
                noalias.add(m.group(1))
    return params, noalias


def interleave_module(text: str) -> tuple[str, int]:
    """The module with the chains of its loop functions' blocks interleaved,
    and how many blocks changed."""
    types = {m.group(1): m.group(2) for m in _TYPE_DEF.finditer(text)}
    lines = text.split("\n")
    out: list[str] = []
    changed = 0
    i = 0
    while i < len(lines):
        m = _LOOP_FN.match(lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end] != "}":
            end += 1
        fn, n = _interleave_function(lines[i:end + 1], m.group(1), types)
        out += fn
        changed += n
        i = end + 1
    return "\n".join(out), changed


def _interleave_function(fn: list[str], sig: str, types: dict[str, str]) -> tuple[list[str], int]:
    params, noalias = _params(sig)
    slots = "%slots" if "%slots" in params else None
    # The slot struct of kernel n is %mk.slots.n (emit_layout.py).
    n = re.search(r"@__mk_wiloop_(\d+)\(", fn[0]).group(1)
    layout = Layout({k[1:]: f"{{ {body} }}" for k, body in types.items()})
    offsets = _field_ranges(layout, f"mk.slots.{n}")
    fields = {f"%mk.slots.{n}": offsets} if offsets is not None else {}
    defs = {}
    for ln in fn[1:-1]:
        m = _DEF.match(ln)
        if m:
            defs[m.group(1)] = m.group(2)
    roots = _Roots(defs, noalias, params, slots, fields)
    # Blocks: a label line, then instructions up to the next label.
    blocks: list[tuple[int, int]] = []
    start = 1
    for k in range(1, len(fn) - 1):
        if _LABEL.match(fn[k]) and k > start:
            blocks.append((start, k))
            start = k
    blocks.append((start, len(fn) - 1))
    out = list(fn)
    moved: set[str] = set()
    changed = 0
    for a, b in blocks:
        first = a + 1 if _LABEL.match(fn[a]) else a
        insts = [ln for ln in fn[first:b] if ln.strip()]
        new = schedule_block(insts, roots)
        if new is None:
            continue
        for ln in insts:
            dm = _DEF.match(ln)
            if dm and _NUMBERED.fullmatch(dm.group(1)):
                moved.add(dm.group(1)[1:])
        out[first:b] = new + [""] * (b - first - len(new))
        changed += 1
    if not changed:
        return fn, 0
    # Numbered values must appear in increasing order: the moved ones get names.
    taken = set(defs)
    rename = {}
    for num in moved:
        name = f"mk.il.{num}"
        while f"%{name}" in taken:
            name += "_"
        rename[num] = name
    body = [_NUMBERED.sub(lambda mm: f"%{rename[mm.group(1)]}" if mm.group(1) in rename else mm.group(0), ln)
            for ln in out[1:-1] if ln != ""]
    return [out[0], *body, out[-1]], changed
