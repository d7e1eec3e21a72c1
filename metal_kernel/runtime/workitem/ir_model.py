"""The per-thread function as the work-item-loop compiler sees it: its
instructions (Inst), local names (Locals), blocks (Block), synchronisation
points (SyncPoint) and the whole function (Function), which every later
stage reads and the cut (cut.py) rewrites in place."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..ir import _DEF, _FMF, _LOCAL, _TOKEN, Call, Module, _name

_PURE_OPS = {
    "add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem", "srem",
    "fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "icmp", "fcmp", "trunc", "zext", "sext",
    "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp", "ptrtoint", "inttoptr", "bitcast",
    "addrspacecast", "getelementptr", "select", "extractelement", "insertelement",
    "shufflevector", "extractvalue", "insertvalue",
}
# LLVM intrinsics without memory effects, as name patterns: the cheap ones
# a value may be recomputed through after a cut (analysis.can_remat), and
# the further ones (square roots, roundings, reductions, overflow checks)
# that the interleaving may move past memory operations (interleave.py).
CHEAP_INTRINSICS = (
    "umin", "umax", "smin", "smax", "abs", "fshl", "fshr", "ctpop", "ctlz", "cttz", "bswap", "bitreverse",
    "fabs", "copysign", "minnum", "maxnum", "minimum", "maximum", r"[su]add\.sat", r"[su]sub\.sat",
    "fmuladd", "fma")
NO_MEMORY_INTRINSICS = CHEAP_INTRINSICS + (
    "sqrt", "floor", "ceil", "trunc", "rint", "round", "roundeven", "nearbyint", r"vector\.reduce\.\w+",
    r"[su]add\.with\.overflow", r"[su]sub\.with\.overflow", r"[su]mul\.with\.overflow",
    r"experimental\.constrained\.\w+")
_PURE_INTRINSIC = re.compile(rf"llvm\.({'|'.join(CHEAP_INTRINSICS)})\.")
_BINOPS = {"add", "sub", "mul", "shl", "lshr", "ashr", "and", "or", "xor", "udiv", "sdiv", "urem",
           "srem", "fadd", "fsub", "fmul", "fdiv", "frem"}
_CASTS = {"trunc", "zext", "sext", "fptrunc", "fpext", "fptoui", "fptosi", "uitofp", "sitofp",
          "ptrtoint", "inttoptr", "bitcast", "addrspacecast"}
_FLAGS = {"nuw", "nsw", "exact", "disjoint", "nneg", "samesign", "inbounds", "volatile", "weak"} | _FMF
_TERMINATORS = {"br", "switch", "ret", "unreachable"}
_UNSUPPORTED_OPS = {"invoke", "callbr", "indirectbr", "resume", "landingpad", "catchswitch",
                    "catchret", "cleanupret", "catchpad", "cleanuppad", "va_arg"}


class Inst:
    __slots__ = ("block", "call", "kind", "name", "op", "sync", "text", "uses")

    def __init__(self, text: str, locals_: Locals):
        self.text = text
        m = _DEF.match(text)
        self.name = _name(m.group(1)) if m else None
        rest = text[m.end():] if m else text.strip()
        w = rest.split(None, 1)
        op = w[0] if w else ""
        if op in ("tail", "musttail", "notail"):
            op = "call"
        self.op = op
        self.call: Call | None = None
        self.kind = ""  # "", "sync", "lowered"
        self.sync = 0
        self.block = ""
        self.uses = locals_.uses(text, self.name)

    @property
    def rest(self) -> str:
        m = _DEF.match(self.text)
        return self.text[m.end():] if m else self.text.strip()


class Locals:
    """Local names of one function: which tokens are values, which labels."""

    def __init__(self, type_names: set[str]):
        self.type_names = type_names
        self.labels: set[str] = set()

    def tokens(self, text: str):
        for m in _TOKEN.finditer(text):
            tok = m.group(0)
            if tok[0] == "%" and _name(tok) not in self.type_names:
                yield m, _name(tok)

    def uses(self, text: str, defined: str | None) -> list[str]:
        out = []
        first_def = defined is not None
        for _, nm in self.tokens(text):
            if first_def and nm == defined:
                first_def = False
                continue
            if nm in self.labels:
                continue
            if nm not in out:
                out.append(nm)
        return out

    def subst(self, text: str, mapping: dict[str, str]) -> str:
        """Replaces local value names (mapping values are full references)."""
        def repl(m):
            tok = m.group(0)
            if tok[0] != "%":
                return tok
            nm = _name(tok)
            if nm in self.type_names:
                return tok
            return mapping.get(nm, tok)
        return _TOKEN.sub(repl, text)


@dataclass
class Block:
    label: str
    insts: list[Inst] = field(default_factory=list)
    succs: list[str] = field(default_factory=list)  # including the fall-through of a cut
    preds: list[str] = field(default_factory=list)
    sync: int = 0  # > 0: the block ends at cut `sync`, continuing in succs[0]

    def phis(self) -> list[Inst]:
        return [i for i in self.insts if i.op == "phi"]


def branch_targets(term: Inst) -> list[str]:
    """The labels a terminator branches to, each once, in order."""
    out = []
    for m in re.finditer(rf"label\s+({_LOCAL})", term.text):
        nm = _name(m.group(1))
        if nm not in out:
            out.append(nm)
    return out


def phi_incoming(inst: Inst) -> list[tuple[str, str]]:
    """[(value text, pred label)] of a phi."""
    body = inst.rest
    out = []
    for m in re.finditer(rf"\[\s*(.+?),\s*({_LOCAL})\s*\]", body):
        out.append((m.group(1).strip(), _name(m.group(2))))
    return out


@dataclass
class SyncPoint:
    id: int
    kind: str  # "barrier" | "simd" | "point" (a resume point in a loop, loop_points.py)
    block: str  # the block that ends at the cut
    cont: str  # the block after the cut
    op: int = 0
    in_size: int = 0
    out_size: int = 0
    compute: str = ""  # '@fn' (SimdLanes form)
    dense: str = ""  # '@fn' (DenseLanes form, what the driver calls)
    live: list[str] = field(default_factory=list)
    tag: int = 0  # the number in the names of its lowered instructions (ids are renumbered)
    uses_arg: bool = False  # simd: its computation reads the lane argument


class Function:
    """One per-thread function `__mk_wi_<sym>`: filled by parse.parse, then
    cut at its synchronisation points by cut.Cutter."""

    def __init__(self, mod: Module, sym: int, whole_simdgroup: bool = False):
        self.mod = mod
        self.sym = sym
        self.whole_simdgroup = whole_simdgroup  # has __mk_sgu_<n> (runtime/simdgroup_uniform.py)
        self.fname = f"__mk_wi_{sym}"
        self.locals = Locals(set(mod.types))
        self.tg_allocs: list[tuple[int, int, int]] = []
        self.syncs: list[SyncPoint] = []
        # Set by parse.parse: the header and the blocks (locals renamed 'v<name>').
        self.param_names: list[str] = []
        self.params: list[str] = []
        self.g = self.x = self.y = self.z = self.lin = ""
        self.attr_group: str | None = None
        self.blocks: dict[str, Block] = {}
        self.order: list[str] = []
        self.entry = ""
        # Set by cut.Cutter: row strides of the simd arrays and the defining
        # instruction of every value.
        self.in_stride = self.out_stride = 1
        self.defs: dict[str, Inst] = {}
        # Set by loop_points.insert: per resume point's block, the loop
        # counter's next value and the thread id it is affine in ("x", "lin").
        self.point_ivs: dict[str, tuple[str, str]] = {}
        self.point_loops: dict[str, set[str]] = {}  # and the blocks of its loop


def same_value(fn: Function, v: str) -> str:
    """The value v merely copies, followed back: `or i32 a, 0` (or `add`),
    `trunc (zext i32 a)`, and the low half of a packed pair, `trunc (bitcast
    <2 x i32> (insertelement (insertelement poison, a, 0), b, 1) to i64)`:
    clang passes a uint2 thread position around as that pair, which
    fold_pair_bitcasts turns into `or a, 0`. Else v itself."""
    for _ in range(8):
        d = fn.defs.get(v)
        if d is None:
            return v
        same = re.match(r"^(?:or|add)(?: disjoint)? i32 (%\S+), 0$", d.rest)
        wide = re.match(r"^trunc(?: nuw| nsw)* i64 (%\S+) to i32$", d.rest)
        w = fn.defs.get(_name(wide.group(1))) if wide else None
        ext = re.match(r"^zext(?: nneg)? i32 (%\S+) to i64$", w.rest) if w else None
        src = same or ext
        nxt = _name(src.group(1)) if src else _pair_low(fn, w) if w else None
        if nxt is None:
            return v
        v = nxt
    return v


def _pair_low(fn: Function, cast: Inst) -> str | None:
    """Element 0 of `bitcast <2 x i32> %vec to i64` when %vec is built by
    insertelements with a named element 0."""
    if cast.op != "bitcast" or not re.match(r"^bitcast <2 x i32> %\S+ to i64$", cast.rest) or not cast.uses:
        return None
    vec = cast.uses[0]
    while True:
        e = fn.defs.get(vec)
        m = re.match(r"^insertelement <2 x i32> (\S+), i32 (\S+), i(?:32|64) (\d+)$",
                     e.rest) if e is not None and e.op == "insertelement" else None
        if m is None:
            return None
        if m.group(3) == "0":
            return _name(m.group(2)) if m.group(2).startswith("%") else None
        if not m.group(1).startswith("%"):
            return None
        vec = _name(m.group(1))


def reachable(starts, succs) -> set[str]:
    """The blocks in `starts` and those reachable from them, `succs(b)`
    giving b's successors (a stage that stops a walk at some block returns
    none for it)."""
    seen = set(starts)
    work = list(seen)
    while work:
        for t in succs(work.pop()):
            if t not in seen:
                seen.add(t)
                work.append(t)
    return seen
