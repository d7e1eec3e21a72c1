"""Whole-simdgroup execution of simdgroup-matrix kernels whose lanes cannot
tell each other apart.

In work-item loops a `simdgroup_multiply_accumulate` is a synchronisation
point: every lane stops, hands its two elements of each operand to the
driver, which computes the product and hands each lane its two elements of
the result. A GEMM's accumulators therefore go through memory at every
product, and the lanes' loads and address arithmetic run 32 times.

Many simdgroup-matrix kernels never look at the lane: every value in them
is the same in all 32 lanes of a simdgroup (addresses from the threadgroup
and simdgroup index, loop counters), except the matrices, whose elements the
lanes only ever touch through `simdgroup_load` / `store` /
`multiply(_accumulate)`. Such a kernel computes the same thing when its
per-thread code runs once per simdgroup with each matrix held whole: a load
is eight row loads, a product 64 FMAs on row vectors, the accumulators stay
in registers across the K loop.

So a library using simdgroup matrices is also compiled with `-DMK_SGU`
(mk/simdgroup_uniform.h: the whole-matrix `simdgroup_matrix`), and this
module decides, on that build's optimised IR, which kernels qualify: their
per-thread function `__mk_wi_<n>(g, x, y, z, lin)` uses neither x, y nor z
and `lin` only as `lin / 32` (the simdgroup index), and reaches no marker
that names or synchronises lanes (`__mk_sync_barrier`, `__mk_sync_simd` for
simd functions, `__mk_thread_index`, `__mk_sgu_lane_dependent` from
`thread_elements()`), no read-modify-write atomic (32 lanes would each add)
and no call through a pointer. A store or a plain load that every lane
performs identically is the same when performed once.

The qualifying functions are renamed `__mk_sgu_<n>`; everything else in
that module becomes internal (the whole-matrix types share mangled names
with the per-lane ones: nothing of this module may meet the main module's
definitions at link time), and global variables it shares with the main
module (`__mk_rt`) become declarations. The work-item driver
(mk/workitem.h) calls `__mk_sgu_<n>` once per simdgroup when every
simdgroup of the group is full; otherwise the kernel runs its work-item
loops as before.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .ir import _GLOBAL, Module, _gref, parse_type

BARRIER = "__mk_sync_barrier"
SIMD = "__mk_sync_simd"
THREAD_INDEX = "__mk_thread_index"
LANE_DEPENDENT = "__mk_sgu_lane_dependent"
PER_LANE_MARKERS = (BARRIER, SIMD, THREAD_INDEX, LANE_DEPENDENT)
FIBER_PREFIX = "__mk_fiber_"
# Fault reporting: ends the dispatch through the runtime (a call through
# __mk_rt); which lane reports does not change what is reported.
_REPORTING = re.compile(r"^__ubsan_handle_")

DEFINE_FLAG = "-DMK_SGU=1"
_USES_MATRICES = re.compile(r"\bsimdgroup_multiply(_accumulate)?\s*\(")
_RMW = re.compile(r"\b(atomicrmw|cmpxchg)\b")
_INDIRECT_CALL = re.compile(r"\bcall\b[^@]*?%[-a-zA-Z$._0-9\"]+\(")
# Inline assembly with an empty template (mk/simdgroup_uniform.h keeps
# matrices in memory with one) does nothing per lane.
_INLINE_ASM = re.compile(r'\basm\b(?:\s+(?:sideeffect|alignstack|inteldialect|unwind))*\s+"(?!")')
_LINKAGE = ("private", "internal", "available_externally", "linkonce", "weak", "common", "appending",
            "extern_weak", "linkonce_odr", "weak_odr", "external")
_VISIBILITY = ("default", "hidden", "protected")


def uses_matrices(cpp_text: str) -> bool:
    """Whether a library's C++ multiplies simdgroup matrices (only then is
    the whole-simdgroup build worth its compile)."""
    return bool(_USES_MATRICES.search(cpp_text))


@dataclass
class Selection:
    text: str = ""  # the module to compile and link, or "" when no kernel qualifies
    symbols: set[int] = field(default_factory=set)
    reasons: dict[int, str] = field(default_factory=dict)  # why a kernel does not qualify


@dataclass
class Built:
    """What pass2.py links: the kernels with a whole-simdgroup function
    and the object holding them."""
    symbols: set[int] = field(default_factory=set)
    objects: tuple[str, ...] = ()


def _closure(mod: Module, start: str) -> set[str]:
    """Defined functions reachable from `start` through references."""
    seen, todo = set(), [start]
    while todo:
        f = todo.pop()
        if f in seen or f not in mod.functions:
            continue
        seen.add(f)
        todo.extend(g for g in mod.globals_referenced(f) if g in mod.functions and g not in seen)
    return seen


def _param_names(define_line: str) -> list[str]:
    m = re.search(rf"{_GLOBAL}\((.*)\)[^)]*\{{\s*$", define_line)
    if not m:
        return []
    return [p.group(1)[1:] for p in re.finditer(r"(%[-a-zA-Z$._0-9]+)\s*(?:,|$)", m.group(1))]


_SHIFT_OR_MASK = re.compile(
    r"^(%[-a-zA-Z$._0-9]+) = (lshr|shl|and|udiv|zext|trunc)( (nuw|nsw|exact|nneg))* "
    r"i(\d+) (%[-a-zA-Z$._0-9]+)(?:, (-?\d+)| to i(\d+))$")


def _lane_bits_only_via_simdgroup(body: list[str], lin: str) -> bool:
    """Whether every value computed from the thread index `lin` depends only
    on lin / 32 (which simdgroup), never on lin % 32 (which lane).

    Values that may depend on the lane bits are followed through shifts,
    masks and integer widening as `lin << s` restricted to a mask of its
    bits (clang writes `(lin / 32) * 64` as `(lin << 1) & -64`); once a
    value's mask leaves out lin's bits 0..4 it is the same in every lane,
    and so is everything computed from it. Any other use of a value that
    may depend on the lane bits fails the check."""
    lane = {f"%{lin}": (0, 0xFFFFFFFF)}  # value -> (shift, mask of its bits that come from lin)

    def lane_dependent(shift: int, mask: int) -> bool:
        return any((mask >> i) & 1 and 0 <= i - shift < 5 for i in range(64))

    for line in body[1:-1]:
        used = [v for v in re.findall(r"%[-a-zA-Z$._0-9]+", line) if v in lane]
        if not used:
            continue
        m = _SHIFT_OR_MASK.match(line.strip())
        if not m or m.group(6) != used[0] or len(used) != 1:
            return False
        name, op, width, arg = m.group(1), m.group(2), int(m.group(5)), m.group(7)
        shift, mask = lane[used[0]]
        full = (1 << width) - 1
        if op in ("zext", "trunc"):
            mask &= (1 << int(m.group(8))) - 1
        elif arg is None:
            return False
        else:
            c = int(arg)
            if op == "udiv":
                if c <= 0 or c & (c - 1):
                    return False
                op, c = "lshr", c.bit_length() - 1
            if op == "lshr":
                shift, mask = shift - c, mask >> c
            elif op == "shl":
                shift, mask = shift + c, (mask << c) & full
            else:
                mask &= c & full
        if lane_dependent(shift, mask):
            lane[name] = (shift, mask)
    return True


def _why_not(mod: Module, fname: str) -> str | None:
    """None when the per-thread function `fname` runs the same in every lane
    of a simdgroup (see the module docstring), else the reason."""
    body = mod.body(fname)
    params = _param_names(body[0])
    if len(params) != 5:
        return "unexpected per-thread signature"
    xyz, lin = params[1:4], params[4]
    for line in body[1:-1]:
        for p in xyz:
            if re.search(rf"%{re.escape(p)}\b", line):
                return "uses its thread position"
    if not _lane_bits_only_via_simdgroup(body, lin):
        return "uses its thread index other than as the simdgroup index"
    for f in sorted(_closure(mod, fname)):
        if _REPORTING.match(f):
            continue
        if f.startswith(FIBER_PREFIX):
            return f"reaches {f}"
        refs = mod.globals_referenced(f)
        hit = sorted(refs & set(PER_LANE_MARKERS))
        if hit:
            return {BARRIER: "synchronises (barrier)", SIMD: "calls a simd function",
                    THREAD_INDEX: "asks for its lane", LANE_DEPENDENT: "reads thread_elements()"}[hit[0]]
        text = "\n".join(mod.body(f)[1:-1])
        if _RMW.search(text):
            return "performs a read-modify-write atomic"
        if _INDIRECT_CALL.search(text):
            return "calls through a pointer"
        if _INLINE_ASM.search(text):
            return "contains inline assembly"
    return None


def _internal_define(line: str) -> str:
    """A `define` line with internal linkage, default visibility and no comdat."""
    head, rest = line.split("@", 1)
    words = [w for w in head.split()[1:] if w not in _LINKAGE and w not in _VISIBILITY and w != "dso_local"]
    rest = re.sub(r"\s+comdat(\([^)]*\))?", "", rest)
    return " ".join(["define", "internal", *words]) + " @" + rest


def _global_line(line: str) -> str:
    """A global variable of the whole-simdgroup module: a mutable one the
    main module defines too (`__mk_rt`, set by the runtime when the library
    is loaded) becomes a declaration of it; anything else that is not
    private already becomes an internal copy."""
    m = re.match(rf"^({_GLOBAL}) = (.*?)\b(global|constant)\s+(.*)$", line)
    if not m:
        return line
    words = m.group(2).split()
    if any(w in ("private", "internal") for w in words):
        return line
    if m.group(3) == "global" and not any(w in ("linkonce", "linkonce_odr", "weak", "weak_odr", "common")
                                          for w in words):
        ty, _ = parse_type(m.group(4), 0)
        return f"{m.group(1)} = external global {ty}"
    kept = [w for w in words if w not in _LINKAGE and w not in _VISIBILITY and w != "dso_local"]
    rest = re.sub(r",\s*comdat(\([^)]*\))?", "", m.group(4))
    return " ".join([m.group(1), "=", "internal", *kept, m.group(3), rest])


def _internalise(mod: Module, renamed: dict[str, str]) -> str:
    out = []
    for line in mod.lines:
        if line.startswith("define "):
            line = _internal_define(line)
        elif line.startswith(("@llvm.used", "@llvm.compiler.used")):
            continue
        elif line.startswith("@"):
            line = _global_line(line)
        elif line.startswith("$") and " = comdat " in line:
            continue
        out.append(line)
    text = "\n".join(out)
    for old, new in renamed.items():
        text = text.replace(f"define internal void {_gref(old)}(", f"define hidden void {_gref(new)}(")
        text = re.sub(rf"{re.escape(_gref(old))}\b", _gref(new), text)
    return text


def select(text: str, symbols) -> Selection:
    """The kernels of the whole-simdgroup build `text` that qualify, and the
    module to link for them."""
    mod = Module(text)
    sel = Selection()
    renamed = {}
    for sym in symbols:
        fname = f"__mk_wi_{sym}"
        if fname not in mod.functions:
            sel.reasons[sym] = "no per-thread function"
            continue
        why = _why_not(mod, fname)
        if why:
            sel.reasons[sym] = why
            continue
        renamed[fname] = f"__mk_sgu_{sym}"
        sel.symbols.add(sym)
    if renamed:
        sel.text = _internalise(mod, renamed)
    return sel
