"""Byte offsets of accesses as polynomials in the thread's ids, and what a
dispatch's actual geometry proves about them.

The instrumentation pass (check/instrument.py) asks, for each access through
a buffer or a program-scope constant, for its offset from the object's start
as a polynomial over

    x, y, z        the thread's position in its threadgroup
    lin            its index in the threadgroup
    g:<offset>     a field of the group (mk/workitem/group.h WiGroup: the
                   threadgroup's position, the dispatch's sizes, ...)
    b:<i>:<off>:<type>   a scalar the kernel reads from buffer i at a
                   constant offset and never writes (`constant uint& n`)
    iv:<i>         the induction variable of counted loop i
                   (check/loops.py), an interval at a dispatch
    bd:<i>         a value bounded by bit arithmetic with a constant
                   (`lid / 32`, `lane & 3`, `x % 8`): record i of `bounded`,
                   an interval at a dispatch

with integer coefficients, or for None when the offset is not such a
polynomial (a value loaded from memory, `%`, `&`, a loop counter
that is not a counted loop's). Wrapping
integer arithmetic is the one way such a polynomial can lie: every point
where a narrow integer is widened records a range the value must stay in.

At a dispatch (check/session.py) the polynomials are evaluated with the real
sizes and scalars: an access whose every thread stays inside its buffer needs
no check, and a buffer that every thread touches in bytes of its own
(`out[i] = ...`) can have no race. A kernel whose every access is proven so,
that uses no threadgroup memory, no private arrays, no barriers, simd
functions or atomics, cannot produce a finding: it runs in its ordinary
build.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from fractions import Fraction

from ..runtime.ir import _split_top, parse_type
from .loops import Blocks, counted_loop

Poly = dict  # tuple[str, ...] (sorted symbols) -> int

# Symbols that stand for an interval of values at a dispatch rather than one
# value per thread: a loop counter walks its range, a bounded value covers
# its interval; neither names the thread that makes an access.
INTERVAL_SYMBOLS = ("iv:", "bd:")

MAX_DEGREE = 3

# WiGroup fields (mk/workitem/group.h) by byte offset
G_GROUP_SIZE = (0, 4, 8)
G_TG_POSITION = (12, 16, 20)
G_BASE = (24, 28, 32)
G_TPTG = (36, 40, 44)
G_NGROUPS = (48, 52, 56)
G_GRID = (60, 64, 68)


def const(c: int) -> Poly:
    return {(): c} if c else {}


def sym(name: str) -> Poly:
    return {(name,): 1}


def add(a: Poly, b: Poly, sign: int = 1) -> Poly:
    out = dict(a)
    for m, c in b.items():
        v = out.get(m, 0) + sign * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def mul(a: Poly, b: Poly) -> Poly | None:
    out: Poly = {}
    for ma, ca in a.items():
        for mb, cb in b.items():
            m = tuple(sorted(ma + mb))
            if len(m) > MAX_DEGREE:
                return None
            v = out.get(m, 0) + ca * cb
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out


def to_json(p: Poly) -> list:
    return [[list(m), c] for m, c in sorted(p.items())]


def from_json(data: list) -> Poly:
    return {tuple(m): c for m, c in data}


@dataclass
class Offset:
    """An access's offset polynomial and the ranges its widened parts must
    stay in: (polynomial, low, high) with low <= value < high."""
    poly: Poly
    ranges: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"poly": to_json(self.poly), "ranges": [[to_json(p), lo, hi] for p, lo, hi in self.ranges]}


_INT = re.compile(r"^i(\d+)$")
_META = re.compile(r",\s*!\w+ !\d+")  # metadata attachments (!tbaa, !range ...)


class Analysis:
    """Offset polynomials of the values of one per-thread function."""

    def __init__(self, defs: dict[str, str], params: list[str], layout, uniform_buffers: set[int], root_of,
                 blocks: Blocks | None = None, loops: list | None = None, bounded: list | None = None):
        self.defs = defs
        self.blocks = blocks
        self.loops = loops if loops is not None else []  # counted loops, by the index of their `iv:` symbol
        self.bounded = bounded if bounded is not None else []  # bit-bounded values, by their `bd:` index
        self.g, self.x, self.y, self.z, self.lin = params
        self.layout = layout
        self.uniform_buffers = uniform_buffers  # buffers the kernel never writes
        self.root_of = root_of  # value -> Root (check/roots.py)
        self.memo: dict[str, tuple | None] = {}

    # -- integers --
    def value(self, v: str, ty: str = "") -> tuple | None:
        """(poly, ranges) of integer value `v`, or None."""
        v = v.strip()
        if re.fullmatch(r"-?\d+", v):
            return const(int(v)), []
        if v in ("true", "false"):
            return const(int(v == "true")), []
        names = {self.x: "x", self.y: "y", self.z: "z", self.lin: "lin"}
        if v in names:
            return sym(names[v]), []
        if not v.startswith("%"):
            return None
        if v in self.memo:
            return self.memo[v]
        self.memo[v] = None  # cycles (loop counters) are not polynomials
        out = self._value(v)
        self.memo[v] = out
        return out

    def _value(self, v: str) -> tuple | None:
        d = self.defs.get(v)
        if d is None:
            return None
        d = _META.sub("", d)
        words = d.split()
        op = words[0]
        if op in ("add", "sub", "mul", "shl", "or"):
            rest = re.sub(r"^\w+\s+((nuw|nsw|disjoint|exact)\s+)*", "", d)
            parts = _split_top(rest)
            ty, _ = parse_type(parts[0], 0)
            a = self.value(parts[0][len(ty):])
            b = self.value(parts[1])
            if a is None or b is None:
                return None
            ranges = a[1] + b[1]
            if op == "add" or (op == "or" and "disjoint" in words[:3]):
                return add(a[0], b[0]), ranges
            if op == "sub":
                return add(a[0], b[0], -1), ranges
            if op == "mul":
                p = mul(a[0], b[0])
                return (p, ranges) if p is not None else None
            if op == "shl" and set(b[0]) <= {()}:
                return {m: c << b[0].get((), 0) for m, c in a[0].items()}, ranges
            return None
        half = self._half(d) or self._packed_shift(d) or self._packed_low_shifted(d)
        if half is not None:
            return half
        if op in ("and", "lshr", "udiv", "urem"):
            return self._bit_bounded(d)
        if re.fullmatch(r"(?:(?:tail|notail|musttail)\s+)?call i32 @__mk_thread_index\(\)(\s*#\d+)?", d):
            return sym("lin"), []  # the running thread's index in its group (mk/workitem.h)
        if op in ("zext", "sext", "trunc"):
            m = re.match(r"\w+\s+(?:(?:nneg|nuw|nsw)\s+)*(\S+)\s+(\S+)\s+to\s+(\S+)", d)
            if not m:
                return None
            src = _INT.match(m.group(1))
            inner = self.value(m.group(2))
            if inner is None or not src:
                return None
            bits = int(src.group(1))
            if op == "zext":
                rng = (inner[0], 0, 1 << bits)
            elif op == "sext":
                rng = (inner[0], -(1 << (bits - 1)), 1 << (bits - 1))
            else:
                dst = _INT.match(m.group(3))
                if not dst:
                    return None
                rng = (inner[0], 0, 1 << (int(dst.group(1)) - 1))
            return inner[0], inner[1] + [rng]
        if op == "load":
            return self._uniform_load(v, d)
        if op == "phi" and self.blocks is not None:
            return self._induction(v, d) or self._merge(v, d)
        return None

    def _half(self, d: str) -> tuple | None:
        """One i32 of two packed into an i64 (`_word`): the low word through
        `trunc` or `and 0xffffffff`, the high one through `lshr 32` (and a
        `trunc` of that)."""
        m = (re.match(r"trunc\s+(?:(?:nuw|nsw)\s+)*i64\s+(%[-\w.$]+)\s+to\s+i32$", d)
             or re.match(r"and\s+i64\s+(%[-\w.$]+),\s*4294967295$", d)
             or re.match(r"lshr\s+(?:exact\s+)?i64\s+(%[-\w.$]+),\s*32$", d))
        if not m:
            return None
        high = d.startswith("lshr")
        src = m.group(1)
        if d.startswith("trunc"):
            s = re.match(r"lshr\s+(?:exact\s+)?i64\s+(%[-\w.$]+),\s*32$", _META.sub("", self.defs.get(src, "")))
            if s:
                src, high = s.group(1), True
        part = self._word(src, high)
        if part is None:
            return None
        return part[0], part[1] + ([] if d.startswith("trunc") else [(part[0], 0, 1 << 32)])

    def _packed_shift(self, d: str) -> tuple | None:
        """`lshr i64 P, s` (0 < s < 32) of two packed i32 (`_word`): the
        high word times 2^(32 - s) plus the low word's top bits (a bounded
        value). The optimiser computes `tg.y * 32` so from the packed group
        position, then clears the low bits with `and`."""
        m = re.match(r"lshr\s+(?:exact\s+)?i64\s+(%[-\w.$]+),\s*(\d+)$", d)
        if not m or not 0 < int(m.group(2)) < 32:
            return None
        s = int(m.group(2))
        low, high = self._word(m.group(1), False), self._word(m.group(1), True)
        if low is None or high is None:
            return None
        top = self._record("lshr", Offset(*low), s, 32)
        return add({m_: c << (32 - s) for m_, c in high[0].items()}, top), low[1] + high[1]

    def _packed_low_shifted(self, d: str) -> tuple | None:
        """`and i64 (shl i64 P, s), 0xffffffff << s` of two packed i32
        (`_word`): the low word times 2^s, as an i32 (the optimiser computes
        `tg.x * 16` so from the packed group position)."""
        m = re.match(r"and\s+i64\s+(%[-\w.$]+),\s*(\d+)$", d)
        if not m:
            return None
        sh = re.match(r"shl\s+(?:(?:nuw|nsw)\s+)*i64\s+(%[-\w.$]+),\s*(\d+)$",
                      _META.sub("", self.defs.get(m.group(1), "")))
        if not sh or not 0 < int(sh.group(2)) < 32 or int(m.group(2)) != (0xFFFFFFFF >> int(sh.group(2))) << int(sh.group(2)):
            return None
        low = self._word(sh.group(1), False)
        if low is None:
            return None
        poly = {m_: c << int(sh.group(2)) for m_, c in low[0].items()}
        return poly, low[1] + [(poly, 0, 1 << 32)]

    def _bit_bounded(self, d: str) -> tuple | None:
        """`and`, `lshr`, `udiv` or `urem` by a constant: no polynomial, but a
        value a dispatch bounds (the interval of its operand shifted,
        divided or masked; `Evaluator.bd_interval`): a symbol of its own.
        Lane and simdgroup arithmetic is made of these (`lid / 32`,
        `(lane >> 1) & 3`)."""
        m = re.match(r"(and|lshr|udiv|urem)\s+(?:exact\s+)?i(\d+)\s+(\S+),\s*(-?\d+)$", d)
        if not m:
            return None
        op, bits, c = m.group(1), int(m.group(2)), int(m.group(4))
        if (op == "lshr" and not 0 <= c < bits) or (op in ("udiv", "urem") and c <= 0) or bits > 64:
            return None
        arg = self.value(m.group(3))
        if arg is None and not ((op == "and" and c >= 0) or op == "urem"):
            return None  # the interval needs the operand's
        return self._record(op, Offset(*arg) if arg is not None else None, c, bits), []

    def _record(self, op: str, arg, c: int, bits: int) -> Poly:
        self.bounded.append({"op": op, "arg": arg.to_json() if arg is not None else None, "c": c, "bits": bits})
        return sym(f"bd:{len(self.bounded) - 1}")

    def _word(self, v: str, high: bool) -> tuple | None:
        """The low or high i32 of i64 `v` when it packs two: `bitcast <2 x
        i32> <x, y> to i64` (the optimiser packs the thread's x and y so), or
        two adjacent WiGroup fields loaded as one (threadgroup_position.x and
        .y: the symbol g64:<offset>)."""
        lanes = self._packed(v)
        if lanes is not None:
            return self.value(lanes[high])
        inner = self.value(v)
        if inner is not None and len(inner[0]) == 1:
            (mono, c), = inner[0].items()
            if c == 1 and len(mono) == 1 and mono[0].startswith("g64:"):
                return sym(f"g:{int(mono[0][4:]) + 4 * high}"), []
        return None

    def _packed(self, v: str) -> tuple[str, str] | None:
        """(low, high) of `v = bitcast <2 x i32> <low, high> to i64`."""
        d = _META.sub("", self.defs.get(v, ""))
        m = re.match(r"bitcast\s+<2 x i32>\s+(%[-\w.$]+)\s+to\s+i64$", d)
        lanes: dict[int, str] = {}
        vec = m.group(1) if m else None
        while vec is not None and len(lanes) < 2:
            e = re.match(r"insertelement\s+<2 x i32>\s+(\S+),\s*i32\s+(\S+),\s*i(?:32|64)\s+([01])$",
                         _META.sub("", self.defs.get(vec, "")))
            if not e:
                return None
            lanes.setdefault(int(e.group(3)), e.group(2))
            vec = e.group(1) if e.group(1).startswith("%") else None
        return (lanes[0], lanes[1]) if len(lanes) == 2 else None

    def _merge(self, v: str, d: str) -> tuple | None:
        """A phi whose incoming values are one polynomial: the same uniform
        value reloaded (a loop bound read again after a barrier), or 0 on an
        edge taken only when a symbol S is 0 and elsewhere a polynomial that
        is 0 when S is (`N == 0 ? 0 : N * row`, the optimiser's peeled empty
        loop)."""
        _, i = parse_type(d, 3)
        incoming = [_split_top(item.strip()[1:-1]) for item in _split_top(d[i:])]
        if not incoming or any(len(p) != 2 for p in incoming):
            return None
        values = [(self.value(val), blk.strip()) for val, blk in incoming]
        zero_when = {blk: s for (val, blk) in values if val is not None and val[0] in ({}, const(0))
                     for s in [self._zero_on_edge(blk, self.blocks.block_of.get(v))] if s}
        rest = [val for val, blk in values if blk not in zero_when]
        if not rest or any(val is None for val in rest) or any(val[0] != rest[0][0] for val in rest):
            return None
        poly = rest[0][0]
        if zero_when and not all(all(s in mono for mono in poly) for s in zero_when.values()):
            return None
        return poly, [r for val in rest for r in val[1]]

    def _zero_on_edge(self, pred: str, block: str | None, depth: int = 0) -> str | None:
        """The symbol S when block `pred` branches to `block` only if S == 0."""
        if block is None or depth > 8:
            return None
        term = self.blocks.terminator.get(pred)
        if term is None and self.lin[1:].isdigit() and pred == f"%{int(self.lin[1:]) + 1}":
            pred, term = "", self.blocks.terminator.get("")  # the entry block, unlabelled in numbered IR
        if term == f"br label {block}" and len(self.blocks.preds.get(pred, [])) == 1:
            # A block of its own on the way (the optimiser's landing pad of
            # a skipped loop): the edge into it decides.
            return self._zero_on_edge(self.blocks.preds[pred][0], pred, depth + 1)
        m = re.match(r"br i1 (%[-\w.$]+), label (%[-\w.$]+), label (%[-\w.$]+)", term or "")
        if not m:
            return None
        cond = _META.sub("", self.defs.get(m.group(1), ""))
        c = re.match(r"icmp (eq|ne) i\d+ (%[-\w.$]+), 0$", cond)
        if not c or (m.group(2) if c.group(1) == "eq" else m.group(3)) != block or m.group(2) == m.group(3):
            return None
        s = self.value(c.group(2))
        if s is None or len(s[0]) != 1:
            return None
        (mono, k), = s[0].items()
        return mono[0] if k == 1 and len(mono) == 1 else None

    def _induction(self, v: str, d: str) -> tuple | None:
        """The induction variable of a counted loop (check/loops.py): a
        symbol of its own, its interval known at a dispatch."""
        loop = counted_loop(v, d, self.defs, self.blocks)
        if loop is None:
            return None
        start, bound = self.value(loop["start"]), self.value(loop["bound"])
        if start is None or bound is None:
            return None
        self.loops.append({"start": Offset(*start).to_json(),
                           "bound": Offset(add(bound[0], const(loop["bound_adjust"])), bound[1]).to_json(),
                           "step": loop["step"], "kind": loop["kind"], "bits": loop["bits"]})
        return sym(f"iv:{len(self.loops) - 1}"), []

    def _uniform_load(self, v: str, d: str) -> tuple | None:
        """A load from the WiGroup or a scalar from a buffer the kernel never
        writes: the same in every thread of the dispatch."""
        if re.search(r"\b(volatile|atomic)\b", d):
            return None
        parts = _split_top(re.sub(r"^load\s+", "", d))
        ty = parts[0].strip()
        if not _INT.match(ty):
            return None
        ptr = parts[1].split()[-1] if parts[1].startswith("ptr") else ""
        base, off = self.constant_offset(ptr)
        if base is None:
            return None
        if base == self.g:
            # WiGroup fields are 32 bits: a wider load spans two of them.
            return sym(f"g:{off}" if ty == "i32" else f"g64:{off}" if ty == "i64" else f"g?:{off}"), []
        r = self.root_of(base)
        if r.kind == "buf" and r.index in self.uniform_buffers:
            return sym(f"b:{r.index}:{off}:{ty}"), []
        return None

    def constant_offset(self, ptr: str) -> tuple[str | None, int]:
        """(base, byte offset) when `ptr` is a constant offset from a value."""
        p = self.pointer(ptr)
        if p is None:
            return None, 0
        base, off = p
        if set(off[0]) <= {()}:
            return base, off[0].get((), 0)
        return None, 0

    # -- pointers --
    def pointer(self, ptr: str) -> tuple[str, tuple] | None:
        """(root value, (offset poly, ranges)) of a pointer built by
        getelementptr from another value."""
        ptr = ptr.strip()
        total, ranges = {}, []
        for _ in range(64):
            d = self.defs.get(ptr)
            if d is None or not d.startswith("getelementptr"):
                return ptr, (total, ranges)
            step = self._gep(_META.sub("", d))
            if step is None:
                return None
            base, (p, r) = step
            total, ranges = add(total, p), ranges + r
            ptr = base
        return None

    def _gep(self, d: str) -> tuple[str, tuple] | None:
        rest = re.sub(r"^getelementptr\s+((inbounds|nuw|nusw|inrange\(\d+, \d+\))\s+)*", "", d)
        parts = _split_top(rest)
        if len(parts) < 2 or not parts[1].startswith("ptr"):
            return None
        elem = parts[0].strip()
        base = parts[1].split()[-1]
        total, ranges = {}, []
        cur = elem
        for k, idx in enumerate(parts[2:]):
            ity, _ = parse_type(idx, 0)
            val = self.value(idx[len(ity):].strip())
            if val is None:
                return None
            p, r = val
            ranges += r
            bits = int(_INT.match(ity).group(1)) if _INT.match(ity) else 64
            if bits < 64 and not (set(p) <= {()}):
                ranges.append((p, -(1 << (bits - 1)), 1 << (bits - 1)))
            if k == 0:
                scale = self.layout.size_align(cur)[0]
            elif cur.startswith("[") or (cur.startswith("<") and not cur.startswith("<{")):
                cur = re.match(r"[\[<]\d+ x (.*)[\]>]$", cur).group(1).strip()
                scale = self.layout.size_align(cur)[0]
            elif cur.startswith(("{", "<{", "%")):
                if not set(p) <= {()}:
                    return None
                off, cur = self.layout.field(cur, p.get((), 0))
                total = add(total, const(off))
                continue
            else:
                return None
            scaled = mul(p, const(scale))
            total = add(total, scaled)
        return base, (total, ranges)


# ------------------------------------------------------------ at a dispatch --

@dataclass
class Geometry:
    grid: list
    group: list
    ngroups: list


def _dim_extremes(coef_x: int, coef_t: int, tpg: int, ng: int, grid: int) -> tuple[int, int]:
    """Min and max of coef_x * x + coef_t * t over the threads of one
    dimension: groups t < ng - 1 are full (x < tpg), the last has
    grid - (ng - 1) * tpg threads."""
    pts = []
    last = grid - (ng - 1) * tpg
    if ng >= 2:
        for t in (0, ng - 2):
            for x in (0, tpg - 1):
                pts.append(coef_x * x + coef_t * t)
    for x in (0, last - 1):
        pts.append(coef_x * x + coef_t * (ng - 1))
    return min(pts), max(pts)


class Evaluator:
    """Polynomials with a dispatch's actual values substituted."""

    def __init__(self, geom: Geometry, scalar, loops: list | None = None, bounded: list | None = None):
        self.geom = geom
        self.scalar = scalar  # (buffer, offset, type) -> int or None
        self.loops = loops or []
        self.bounded = bounded or []
        self.intervals: dict[int, tuple | None] = {}
        self.bd_intervals: dict[int, tuple | None] = {}
        tpg = geom.group
        self.partial = any(geom.grid[d] % tpg[d] for d in range(3))
        self.flat = tpg[1] == 1 and tpg[2] == 1

    def _symbol(self, s: str):
        """A symbol's value (an int), its thread variable ('x', 'tx', ...), or
        None when it is not a linear term here."""
        g = self.geom
        if s in ("x", "y", "z"):
            return s
        if s == "lin":
            return "x" if self.flat else None
        if s.startswith("g:"):
            off = int(s[2:])
            for fields, values in ((G_TPTG, g.group), (G_NGROUPS, g.ngroups), (G_GRID, g.grid)):
                if off in fields:
                    return values[fields.index(off)]
            if off in G_GROUP_SIZE:
                return None if self.partial else g.group[G_GROUP_SIZE.index(off)]
            if off in G_TG_POSITION:
                return "t" + "xyz"[G_TG_POSITION.index(off)]
            if off in G_BASE:
                return ("t" + "xyz"[G_BASE.index(off)], g.group[G_BASE.index(off)])
            return None
        if s.startswith("b:"):
            _, b, off, ty = s.split(":")
            return self.scalar(int(b), int(off), ty)
        return None

    def linear(self, poly: Poly) -> dict | None:
        """{variable or '': coefficient} (variables x, y, z, tx, ty, tz), or
        None when the polynomial is not linear in them here."""
        out: dict = {}
        for mono, c in poly.items():
            var = ""
            coef = c
            for s in mono:
                if s.startswith(INTERVAL_SYMBOLS):
                    if self.interval(s) is None or var:
                        return None
                    var = s
                    continue
                v = self._symbol(s)
                if v is None:
                    return None
                if isinstance(v, tuple):  # base = t * group size
                    v, k = v
                    coef *= k
                if isinstance(v, int):
                    coef *= v
                    continue
                if var:
                    return None  # a product of two thread variables
                var = v
            out[var] = out.get(var, 0) + coef
        return out

    def interval(self, s: str) -> tuple[int, int] | None:
        """[low, high] of an interval symbol (INTERVAL_SYMBOLS) here."""
        return self.iv_interval(int(s[3:])) if s.startswith("iv:") else self.bd_interval(int(s[3:]))

    def bd_interval(self, k: int) -> tuple[int, int] | None:
        """[low, high] of bounded value k (`Analysis._bit_bounded`) over
        every thread, from its operand's interval; None when that is not
        known here and the constant alone does not bound it."""
        if k in self.bd_intervals:
            return self.bd_intervals[k]
        self.bd_intervals[k] = None
        rec = self.bounded[k] if 0 <= k < len(self.bounded) else None
        out = None
        if rec is not None:
            op, c, bits = rec["op"], rec["c"], rec["bits"]
            lo = hi = None
            arg = rec["arg"]
            if arg is not None:
                lin = self.linear(from_json(arg["poly"]))
                if lin is not None and all(self.in_range(from_json(p), a, b) for p, a, b in arg["ranges"]):
                    lo, hi = self.extremes(lin)
            # The operand as the instruction reads it: its bits unsigned.
            known = lo is not None and 0 <= lo and hi < 1 << bits
            if op == "and":
                mask = c & ((1 << bits) - 1)
                low_zeros = (mask & -mask).bit_length() - 1
                if known and mask and ((1 << hi.bit_length()) - 1) >> low_zeros << low_zeros & ~mask == 0:
                    # Every bit the operand can have from the mask's lowest
                    # up is in the mask: it only clears the low bits, which
                    # keeps order (`(8 * sg) & ~15` of sg < 4 is at most 16).
                    out = (lo & mask, hi & mask)
                elif c >= 0:
                    out = (0, min(c, hi) if known else c)  # clearing bits never makes a value larger
                elif known and hi < 1 << (bits - 1):
                    out = (0, hi)
            elif op == "urem":
                out = (lo, hi) if known and hi < c else (0, c - 1)
            elif known:
                out = (lo >> c, hi >> c) if op == "lshr" else (lo // c, hi // c)
        self.bd_intervals[k] = out
        return out

    def iv_interval(self, k: int) -> tuple[int, int] | None:
        """[low, high] of counted loop k's induction variable over every
        thread, or None when its start or bound is not known here or the
        counter could wrap (then the loop's accesses stay unproven)."""
        if k in self.intervals:
            return self.intervals[k]
        self.intervals[k] = None  # a loop's bound never depends on itself
        loop = self.loops[k] if 0 <= k < len(self.loops) else None
        out = None
        if loop is not None:
            ends = []
            for key in ("start", "bound"):
                off = loop[key]
                lin = self.linear(from_json(off["poly"]))
                if lin is None or not all(self.in_range(from_json(p), lo, hi) for p, lo, hi in off["ranges"]):
                    break
                ends.append(self.extremes(lin))
            if len(ends) == 2:
                (s_lo, s_hi), (b_lo, b_hi) = ends
                # Every value, and the step past the last one, stays in the
                # counter's non-negative signed range: no wrap, signed or not.
                fits = s_lo >= 0 and max(s_hi, b_hi) + loop["step"] <= 1 << (loop["bits"] - 1)
                if fits and loop["kind"] == "lt" and s_lo == s_hi and b_lo == b_hi and b_lo > s_lo and loop["step"] > 0:
                    # One start and bound for every thread: the last value
                    # the step lands on (`t += 16` below N stops at N - 16).
                    out = (s_lo, s_lo + (b_lo - 1 - s_lo) // loop["step"] * loop["step"])
                elif fits and loop["kind"] == "lt":
                    out = (s_lo, max(s_hi, b_hi - 1))
                elif fits and loop["kind"] == "ne" and s_hi < b_lo:
                    out = (s_lo, b_hi - 1)  # the bound is reached, never passed
        self.intervals[k] = out
        return out

    def extremes(self, lin: dict) -> tuple[int, int]:
        g = self.geom
        lo = hi = lin.get("", 0)
        for var, c in lin.items():
            if var.startswith(INTERVAL_SYMBOLS):
                a, b = self.interval(var)
                lo, hi = lo + min(c * a, c * b), hi + max(c * a, c * b)
        for d, axis in enumerate("xyz"):
            a, b = _dim_extremes(lin.get(axis, 0), lin.get("t" + axis, 0), g.group[d], g.ngroups[d], g.grid[d])
            lo, hi = lo + a, hi + b
        return lo, hi

    def in_range(self, poly: Poly, low: int, high: int, known: list | None = None) -> bool:
        lin = self.linear(poly)
        if lin is None:
            return False
        lo, hi = self.bounds(lin, known or [])
        return low <= lo and hi < high

    def constraints(self, guards: list) -> list[tuple[dict, int, int]]:
        """What an access's guards (check/guards.py) say here, as (linear
        form V without constant, low, high): low <= V <= high for every
        thread that makes the access. A guard whose sides could have
        wrapped, or that is not linear here, says nothing."""
        out = []
        for g in guards:
            sides = []
            for key in ("lhs", "rhs"):
                off = g[key]
                lin = self.linear(from_json(off["poly"]))
                if lin is None or not all(self.in_range(from_json(p), lo, hi) for p, lo, hi in off["ranges"]):
                    break
                sides.append(lin)
            if len(sides) < 2:
                continue
            bits = g["bits"]
            low, high = (-(1 << (bits - 1)), 1 << (bits - 1)) if g["signed"] else (0, 1 << bits)
            rhs_lo, rhs_hi = self.extremes(sides[1])
            lhs_lo, lhs_hi = self.extremes(sides[0])
            # Compared as `bits`-bit integers: the same as comparing the
            # polynomials only while the bit pattern reads as their value.
            if rhs_lo < low or rhs_hi >= high or lhs_lo < low or lhs_hi >= high:
                continue
            diff = add(sides[0], {k: -v for k, v in sides[1].items()})  # lhs - rhs < 0
            k = diff.pop("", 0)
            if not diff:
                continue
            v_lo, v_hi = self.extremes(diff)
            out.append((diff, v_lo, min(v_hi, -1 - k)))
        return out

    def bounds(self, lin: dict, known: list) -> tuple[int, int]:
        """extremes() narrowed by what is known where the access runs: the
        parts of `lin` that are multiples of a constrained form take that
        form's range (both results are sound; the narrower is kept)."""
        lo, hi = self.extremes(lin)
        if not known:
            return lo, hi
        rest = {k: Fraction(v) for k, v in lin.items() if k}
        c_lo = c_hi = Fraction(lin.get("", 0))
        for form, f_lo, f_hi in known:
            var = next((v for v in sorted(form) if rest.get(v)), None)
            if var is None:
                continue
            c = rest[var] / form[var]
            for v, a in form.items():
                rest[v] = rest.get(v, 0) - c * a
            a, b = c * f_lo, c * f_hi
            c_lo, c_hi = c_lo + min(a, b), c_hi + max(a, b)
        r_lo, r_hi = self.extremes({k: v for k, v in rest.items() if v})
        return max(lo, math.floor(c_lo + r_lo)), min(hi, math.ceil(c_hi + r_hi))

    def exclusive(self, parts: list[tuple[dict, int, list]]) -> bool:
        """Whether accesses (linear form, size, constraints) of all threads
        touch bytes of their own: one linear part for all, mapping the
        threads that make them apart by at least the footprint of one
        thread's accesses."""
        if not parts:
            return True
        if any(k.startswith(INTERVAL_SYMBOLS) for lin, _, _ in parts for k in lin):
            return False  # a loop or a bounded value walks a range, owned by no one thread
        key = {k: v for k, v in parts[0][0].items() if k}
        for lin, _, _ in parts:
            if {k: v for k, v in lin.items() if k} != key:
                return False
        lo = min(lin.get("", 0) for lin, _, _ in parts)
        hi = max(lin.get("", 0) + size for lin, size, _ in parts)
        width = hi - lo
        g = self.geom
        dims = []
        for d, axis in enumerate("xyz"):
            t = "t" + axis
            a = key.get(axis, 0)
            if a and key.get(t, 0) == a * g.group[d]:
                # Linear in the global position: one dimension, as long as
                # the threads that pass every part's guards can reach.
                extent = max(self._global_extent(d, known) for _, _, known in parts)
                if extent > 1:
                    dims.append((abs(a), extent))
                continue
            local = max(self._local_extent(axis, g.group[d], known) for _, _, known in parts)
            for var, extent in ((axis, local), (t, g.ngroups[d])):
                if extent > 1:
                    dims.append((abs(key.get(var, 0)), extent))
        span = width
        for coef, extent in sorted(dims):
            if coef < span:
                return False
            span += coef * (extent - 1)
        return True

    @staticmethod
    def _local_extent(axis: str, extent: int, known: list) -> int:
        """How many positions in the group along `axis` the threads that pass
        one part's guards can have: the group's, or fewer when a guard bounds
        b * position from above (b > 0; `if (lid == 0)` leaves one)."""
        for form, _, f_hi in known:
            b = form.get(axis, 0)
            if b > 0 and set(form) == {axis}:
                extent = min(extent, max(0, math.floor(f_hi / b) + 1))
        return extent

    def _global_extent(self, d: int, known: list) -> int:
        """How many global positions along dimension d the threads that pass
        one part's guards can have: the grid's, or fewer when a guard bounds
        b * position from above (b > 0)."""
        g = self.geom
        axis, t = "xyz"[d], "t" + "xyz"[d]
        extent = g.grid[d]
        for form, _, f_hi in known:
            b = form.get(axis, 0)
            if b > 0 and set(form) <= {axis, t} and (form.get(t, 0) == b * g.group[d] or g.ngroups[d] == 1):
                extent = min(extent, max(0, math.floor(f_hi / b) + 1))
        return extent
