"""Pairs of float simdgroup-matrix products that share their left operand,
joined in the whole-simdgroup build's optimised IR.

A GEMM's inner step multiplies each loaded `a[i]` by several `b[j]`. Run
whole (runtime/simdgroup_uniform.py) a product is 64 broadcasts of a's
elements and 64 FMAs on rows; two products with the same `a` computed
together broadcast each element once for both, and interleave twice as many
independent accumulators. C++ cannot see the next statement, so the
whole-simdgroup header (mk/simdgroup_uniform.h) routes each float product
through a call to `__mk_sgu_mma_f32(d, a, b, c)`, declared and never
defined, and this pass, on the IR where loops are unrolled and calls sit
side by side, replaces:

- two calls in a row (only instructions that touch no memory between them)
  with the same `a` whose results are provably disjoint from what the other
  reads, by one call to `__mk_sgu_mma_f32_pair(d1, d2, a, b1, b2, c1, c2)`
  at the second call's place;
- every other call by `__mk_sgu_mma_f32_one(d, a, b, c)`.

Both are defined by the header and inlined when the module is compiled.
Disjoint is proven only for matrices on the stack: offsets into allocas,
where different allocas never overlap and one alloca's matrices do when
their offsets are less than a matrix apart. A pair computes rows of d1 and
d2 and writes them as it goes, so each result must be disjoint from a, b1,
b2, the other result and the other product's c, and be its own c or
disjoint from it; anything else stays two products. Each element's FMAs
keep their order: the bits are those of two separate products.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

CALL = "__mk_sgu_mma_f32"
ONE = CALL + "_one"
PAIR = CALL + "_pair"
MATRIX_BYTES = 256  # simdgroup_matrix<float, 8, 8>: eight rows of eight floats

_VALUE = r"%[-a-zA-Z$._0-9]+"
_CALL_LINE = re.compile(rf"^(\s*)((?:tail |notail )?call void )@{CALL}\((.*)\)(.*)$")
_ALLOCA = re.compile(rf"^\s*({_VALUE}) = alloca ")
_GEP_I8 = re.compile(rf"^\s*({_VALUE}) = getelementptr (?:inbounds |nuw |nusw )*i8, ptr ({_VALUE}), i64 (-?\d+)$")
# Instructions between two products that keep them adjacent: no memory
# access, no call, no control flow.
_TOUCHES_MEMORY = re.compile(r"\b(call|invoke|callbr|store|load|atomicrmw|cmpxchg|fence|va_arg)\b")
_ENDS_BLOCK = re.compile(r"^\s*(br|switch|ret|unreachable|indirectbr|resume)\b|^[-a-zA-Z$._0-9\"]+:")
_REFERENCE = re.compile(rf"@{CALL}(?![-a-zA-Z$._0-9])")
_DEBUG_RECORD = re.compile(r"^\s*(#dbg_|call void @llvm\.dbg\.)")


@dataclass
class Fused:
    text: str
    pairs: int  # calls joined in pairs
    singles: int  # calls left alone


def _split_args(text: str) -> list[str]:
    """A call's arguments at the top level of its parentheses."""
    args, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(text[start:i].strip())
            start = i + 1
    args.append(text[start:].strip())
    return args


def _value(arg: str) -> str:
    """The value an argument passes: `%name`, `null`, or "" for anything
    else (a constant expression)."""
    last = arg.split()[-1] if arg.split() else ""
    return last if re.fullmatch(_VALUE, last) or last == "null" else ""


class _Places:
    """Where the pointers of one function point: (alloca, byte offset)."""

    def __init__(self, body: list[str]):
        self.allocas: set[str] = set()
        self.offsets: dict[str, tuple[str, int]] = {}  # constant-offset GEP -> (pointer, bytes)
        for line in body:
            m = _ALLOCA.match(line)
            if m:
                self.allocas.add(m.group(1))
                continue
            m = _GEP_I8.match(line)
            if m:
                self.offsets[m.group(1)] = (m.group(2), int(m.group(3)))

    def place(self, value: str) -> tuple[str, int] | None:
        offset = 0
        for _ in range(64):
            if value in self.allocas:
                return value, offset
            if value not in self.offsets:
                return None
            value, step = self.offsets[value]
            offset += step
        return None

    def disjoint(self, p: str, q: str) -> bool:
        a, b = self.place(p), self.place(q)
        if a is None or b is None:
            return False
        return a[0] != b[0] or abs(a[1] - b[1]) >= MATRIX_BYTES

    def same(self, p: str, q: str) -> bool:
        if p == q:
            return True
        a, b = self.place(p), self.place(q)
        return a is not None and a == b


def _pairable(places: _Places, first: list[str], second: list[str]) -> bool:
    (d1, a1, b1, c1), (d2, a2, b2, c2) = ([_value(x) for x in call] for call in (first, second))
    if not a1 or a1 != a2 or "" in (d1, d2, b1, b2, c1, c2):
        return False
    for d in (d1, d2):
        if not all(places.disjoint(d, x) for x in (a1, b1, b2)):
            return False
    if not places.disjoint(d1, d2):
        return False
    for k, c in enumerate((c1, c2)):
        if c == "null":
            continue
        for j, d in enumerate((d1, d2)):
            if not ((j == k and places.same(d, c)) or places.disjoint(d, c)):
                return False
    return True


def _fuse_function(body: list[str]) -> tuple[list[str], int, int]:
    places = _Places(body)
    out: list[str] = []
    pending = None  # (index in out, args) of a product that may pair with the next
    pairs = singles = 0
    for line in body:
        m = _CALL_LINE.match(line)
        if m:
            args = _split_args(m.group(3))
            if len(args) != 4:
                raise ValueError(f"unexpected call of {CALL}: {len(args)} arguments")
            if pending is not None and _pairable(places, pending[1], args):
                first = pending[1]
                joined = [first[0], args[0], first[1], first[2], args[2], first[3], args[3]]
                out[pending[0]] = None  # the first call moves to the second's place
                out.append(f"{m.group(1)}{m.group(2)}@{PAIR}({', '.join(joined)}){m.group(4)}")
                pairs += 1
                pending = None
                continue
            out.append(line)
            pending = (len(out) - 1, args)
            continue
        if pending is not None and (_ENDS_BLOCK.match(line) or
                                    (_TOUCHES_MEMORY.search(line) and not _DEBUG_RECORD.match(line))):
            pending = None
        out.append(line)
    result = []
    for line in out:
        if line is None:
            continue
        m = _CALL_LINE.match(line)
        if m:
            line = f"{m.group(1)}{m.group(2)}@{ONE}({m.group(3)}){m.group(4)}"
            singles += 1
        result.append(line)
    return result, pairs, singles


def fuse(text: str) -> Fused:
    """The module `text` with its products paired or made single (see the
    module docstring). Raises ValueError when a reference to the declared
    function is left that this pass did not understand: the module would
    not link."""
    lines = text.split("\n")
    out: list[str] = []
    body: list[str] | None = None
    pairs = singles = 0
    for line in lines:
        if body is not None:
            body.append(line)
            if line.startswith("}"):
                fused, p, s = _fuse_function(body)
                out.extend(fused)
                pairs, singles, body = pairs + p, singles + s, None
            continue
        if line.startswith("define "):
            body = [line]
            continue
        if line.startswith("declare ") and _REFERENCE.search(line):
            continue
        out.append(line)
    result = "\n".join(out)
    if _REFERENCE.search(result):
        raise ValueError(f"{CALL} is still referenced")
    return Fused(result, pairs, singles)
