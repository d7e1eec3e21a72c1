"""The checking mode's instrumentation: every memory access of every
per-thread function goes through a check (mk/check.h).

Input: the optimised LLVM IR, with line tables, of a kernel library built
with MK_WORKITEM and MK_CHECK (buffers and [[threadgroup(n)]] parameters are
bound through the markers ``__mk_chk_buffer(g, i)`` / ``__mk_chk_tgparam(g,
i)``, so the object behind every pointer can be named). For each per-thread
function ``__mk_wi_<n>(g, x, y, z, lin)`` this pass

1. traces the pointer of every load, store, atomic and memory copy back to
   its *root*: a buffer, a threadgroup variable (``__mk_tg_alloc``), a
   [[threadgroup(n)]] parameter, a private array (``alloca``), a
   program-scope constant (a global), the WiGroup itself (the runtime's
   own reads: not checked), or unknown (loaded from memory, chosen between
   objects, made from an integer: classified at run time);
2. puts in front of the access a call to the root's check function, whose
   result (the pointer, or a zero block / sink when the access is outside
   its object) the access then uses;
3. gives each access a *site* (its line in the user's source, from the line
   tables, following inlined calls out of the runtime's headers), and passes
   each barrier's and simd function's site to the driver in the marker's
   constant operand;
4. decides each root's shadow *granule* (the smallest access the kernel
   makes to it, so accesses of different threads to neighbouring elements
   never share an entry) and which buffers the kernel may write;
5. replaces the binding markers by the loads from `g` they stand for and
   strips the debug information (runtime/workitem/ takes the result).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.ir import _DEF, _GLOBAL, _LABEL_LINE, _LOCAL, Module, Unsupported, _name, _split_top, parse_call, parse_type
from ..runtime.ir_layout import Layout
from . import summarise as S
from .affine import Analysis, Offset, add, const
from .cfg import Blocks
from .debuginfo import DebugInfo, strip_debug
from .guards import Guards
from .invariant import tg_invariant
from .roots import _DBG_STRIP, _END, Function, Root, _operand_value

# mk/workitem/group.h: offsets in WiGroup
WIGROUP_TG_BUFFERS = 592
WIGROUP_BUFFERS = 1104

# mk/check.h: access bits
A_READ, A_WRITE, A_ATOMIC = 1, 2, 4
A_ALIGN_SHIFT, A_GRANULE_SHIFT = 4, 8
MAX_SITES = 0xFFFE  # site ids are 16 bits in shadow entries; 0xFFFF: unknown
UNKNOWN_SITE = 0xFFFF

SIMD_BARRIER_OP = 1  # mk/simd.h, enum SimdOp
MEMORY_INTRINSICS = re.compile(r"llvm\.(memcpy|memmove|memset)(\.inline)?\.")
# A device-scope fence (mk/atomic.h, mkcuda/builtins.h): the marker becomes
# the checker's __mk_chk_fence(g, lin, kind), and every atomic on a buffer of a
# function with one is followed by __mk_chk_acquire (mk/check_sync.h).
FENCE_MARKER = "@__mk_chk_fence_marker("


@dataclass(frozen=True)
class Site:
    """Where an access (or barrier, simd call) is in the user's source."""
    file: str
    line: int
    column: int
    function: str
    what: str  # "read", "write", "atomic", "copy", "barrier", "simd"


@dataclass
class KernelInfo:
    """What the host needs to know about one kernel's checked build."""
    buffer_granule: dict[int, int] = field(default_factory=dict)  # log2 of the shadow granule
    written: set[int] = field(default_factory=set)  # buffers the kernel may write
    float_atomics: set[int] = field(default_factory=set)  # buffers with float atomics or compare-and-swap
    writes_unknown: bool = False  # a store through a pointer of unknown origin
    unchecked_calls: list[str] = field(default_factory=list)
    not_instrumented: str = ""  # why the pass left this kernel unchecked
    # What check/session.py needs to prove a dispatch safe without running it
    # instrumented: each access through a buffer or constant (its offset as a
    # polynomial, check/affine.py, or None) and what else the kernel does.
    accesses: list = field(default_factory=list)
    loops: list = field(default_factory=list)  # counted loops the offsets' `iv:` symbols name
    bounded: list = field(default_factory=list)  # bit-bounded values the offsets' `bd:` symbols name
    uses: set = field(default_factory=set)  # "threadgroup", "private", "unknown", "atomic", "sync", "simd"
    summaries: int = 0  # loops whose checks are summarised (check/summarise.py)
    # Why threadgroup memory may behave differently from one group to another
    # of the same shape ('' when it cannot: check/invariant.py).
    tg_variant: str = "no threadgroup memory"
    edges: list = field(default_factory=list)  # its edge conditions, as polynomials (check/invariant.py)

    def to_json(self) -> dict:
        return {"buffer_granule": {str(k): v for k, v in self.buffer_granule.items()},
                "written": sorted(self.written), "float_atomics": sorted(self.float_atomics),
                "writes_unknown": self.writes_unknown, "unchecked_calls": self.unchecked_calls,
                "accesses": self.accesses, "loops": self.loops, "bounded": self.bounded, "uses": sorted(self.uses),
                **({"summaries": self.summaries} if self.summaries else {}),
                **({"tg_invariant": True, "edges": self.edges} if not self.tg_variant else {}),
                **({"not_checked": self.not_instrumented} if self.not_instrumented else {})}


@dataclass
class Result:
    text: str
    sites: list[Site]
    kernels: dict[int, KernelInfo]
    globals: list[str]  # program-scope variables, by the index their checks name


@dataclass
class Access:
    line: int      # index in the function's lines
    ptrs: list[tuple[str, str]]  # (pointer operand text, "read"/"write") per pointer
    size: str      # bytes: an integer, or an SSA value (memory copies)
    info_bits: int
    elem_align: int
    kind: str      # "load", "store", "atomic", "copy", "set"
    float_atomic: bool = False
    stored: tuple[str, str] | None = None  # a plain store's (type, value): checked as silent or not


def _access(text: str, layout: Layout) -> Access | None:
    """The memory access an instruction makes, if any."""
    body = text.strip()
    dm = _DEF.match(text)
    if dm:
        body = text[dm.end():].strip()
    body = _DBG_STRIP.sub("", body)
    op = body.split(None, 1)[0] if body else ""
    if op == "load":
        rest = body[4:].strip()
        atomic = rest.startswith("atomic")
        rest = re.sub(r"^(atomic\s+)?(volatile\s+)?", "", rest)
        parts = _split_top(rest)
        t = parts[0]
        ptr = _operand_value(parts[1])
        return Access(0, [(ptr, "read")], str(layout.store_size(t)), A_READ | (A_ATOMIC if atomic else 0),
                      layout.element_align(t), "load")
    if op == "store":
        rest = body[5:].strip()
        atomic = rest.startswith("atomic")
        rest = re.sub(r"^(atomic\s+)?(volatile\s+)?", "", rest)
        parts = _split_top(rest)
        t, end = parse_type(parts[0], 0)
        ptr = _operand_value(parts[1])
        stored = None if atomic else (parts[0][:end].strip(), parts[0][end:].strip())
        return Access(0, [(ptr, "write")], str(layout.store_size(t)), A_WRITE | (A_ATOMIC if atomic else 0),
                      layout.element_align(t), "store", stored=stored)
    if op == "atomicrmw":
        rest = re.sub(r"^atomicrmw\s+(volatile\s+)?", "", body)
        parts = _split_top(rest)
        opname, _, ptr = parts[0].partition(" ")
        t, _ = parse_type(parts[1], 0)
        fl = opname.startswith("f")
        return Access(0, [(_operand_value(ptr), "write")], str(layout.store_size(t)),
                      A_READ | A_WRITE | A_ATOMIC, layout.element_align(t), "atomic", float_atomic=fl)
    if op == "cmpxchg":
        rest = re.sub(r"^cmpxchg\s+(weak\s+)?(volatile\s+)?", "", body)
        parts = _split_top(rest)
        t, _ = parse_type(parts[1], 0)
        # Compare-and-swap loops are how float atomics (and c10's half and
        # bfloat ones) are made: their results may depend on the order.
        return Access(0, [(_operand_value(parts[0]), "write")], str(layout.store_size(t)),
                      A_READ | A_WRITE | A_ATOMIC, layout.element_align(t), "atomic", float_atomic=True)
    if op in ("call", "tail", "musttail", "notail") and MEMORY_INTRINSICS.search(body.split("(")[0]):
        c = parse_call(body)
        name = _name(c.callee)
        vals = [v for _, v in c.args]
        if "memset" in name:
            return Access(0, [(vals[0], "write")], vals[2], A_WRITE, 1, "set")
        return Access(0, [(vals[1], "read"), (vals[0], "write")], vals[2], 0, 1, "copy")
    return None


# --------------------------------------------------------- the pass --

class Instrumenter:
    def __init__(self, text: str, symbols: list[int], runtime_dirs: tuple[str, ...]):
        self.mod = Module(text)
        self.symbols = symbols
        self.layout = Layout(self.mod.types)
        self.debug = DebugInfo(self.mod.lines, runtime_dirs)
        self.globals = {}
        for ln in self.mod.lines:
            m = re.match(rf"^({_GLOBAL}) = ", ln)
            if m:
                self.globals[_name(m.group(1))] = ln
        self.global_names: list[str] = []
        self.sites: list[Site] = []
        self.site_ids: dict[Site, int] = {}
        self.kernels: dict[int, KernelInfo] = {}

    def site(self, line_text: str, what: str) -> int:
        m = re.search(r"!dbg (!\d+)", line_text)
        where = self.debug.site(m.group(1)) if m else None
        if where is None:
            return UNKNOWN_SITE
        s = Site(where[0], where[1], where[2], where[3], what)
        if s not in self.site_ids:
            if len(self.sites) >= MAX_SITES:
                return UNKNOWN_SITE
            self.site_ids[s] = len(self.sites)
            self.sites.append(s)
        return self.site_ids[s]

    def run(self) -> Result:
        lines = self.mod.lines
        replaced: dict[str, list[str]] = {}
        for sym in self.symbols:
            fname = f"__mk_wi_{sym}"
            if fname not in self.mod.functions:
                continue
            a, b = self.mod.functions[fname]
            info = KernelInfo()
            try:
                replaced[fname] = self.function(lines[a:b + 1], info)
            except Unsupported as e:
                info.not_instrumented = str(e)
                replaced[fname] = _bindings_only(lines[a:b + 1])
            self.kernels[sym] = info
        out = []
        i = 0
        spans = {self.mod.functions[f][0]: (f, self.mod.functions[f][1]) for f in replaced}
        while i < len(lines):
            if i in spans:
                f, end = spans[i]
                out.extend(replaced[f])
                i = end + 1
                continue
            out.append(lines[i])
            i += 1
        return Result("\n".join(strip_debug(out)) + "\n", self.sites, self.kernels, self.global_names)

    def function(self, flines: list[str], info: KernelInfo) -> list[str]:
        fn = Function(flines, self.layout, self.globals)
        accesses: list[tuple[int, Access, list[Root]]] = []
        for i, ln in enumerate(flines[1:-1], start=1):
            try:
                acc = _access(ln, self.layout)
            except (Unsupported, IndexError, ValueError):
                acc = None
            if acc is None:
                continue
            roots = [fn.root(p) for p, _ in acc.ptrs]
            accesses.append((i, acc, roots))
        # Granules: the smallest access each root sees (object sizes permitting).
        granule: dict[Root, int] = {}
        for _, acc, roots in accesses:
            size = int(acc.size) if acc.size.isdigit() else 1
            g = 1
            while g * 2 <= min(max(size, 1), acc.elem_align if acc.kind in ("load", "store", "atomic") else 1, 16):
                g *= 2
            for r in roots:
                granule[r] = min(granule.get(r, 16), g)
        analysis = self._describe(fn, accesses, info)
        private_init = self._trackable_allocas(fn, [r for _, _, rs in accesses for r in rs])
        out = list(flines)
        entry_extra: list[str] = []
        shadow_of: dict[str, str] = {}
        for r in private_init:
            nm = f"%mk.init{len(shadow_of)}"
            count = max(1, (r.size + (1 << _log2(granule[r])) - 1) >> _log2(granule[r]))
            shadow_of[r.base] = nm
            entry_extra += [f"  {nm} = alloca [{count} x i8], align 1",
                            f"  call void @llvm.memset.p0.i64(ptr {nm}, i8 0, i64 {count}, i1 false)"]
        checks: list[S.Check] = []
        for i, acc, roots in accesses:
            what = {"load": "read", "store": "write", "atomic": "atomic"}.get(acc.kind, acc.kind)
            site = self.site(flines[i], what)
            for k, ((ptr, rw), r) in enumerate(zip(acc.ptrs, roots)):
                if r.kind in ("g", "groupinfo"):
                    continue
                bits = acc.info_bits or (A_READ if rw == "read" else A_WRITE)
                if acc.kind == "set":
                    bits = A_WRITE
                bits |= _log2(acc.elem_align) << A_ALIGN_SHIFT
                bits |= _log2(granule.get(r, 1)) << A_GRANULE_SHIFT
                if r.kind == "buf":
                    info.buffer_granule[r.index] = min(info.buffer_granule.get(r.index, 4), _log2(granule[r]))
                    if bits & (A_WRITE | A_ATOMIC):
                        info.written.add(r.index)
                    if acc.float_atomic:
                        info.float_atomics.add(r.index)
                elif r.kind == "unknown" and bits & (A_WRITE | A_ATOMIC):
                    info.writes_unknown = True
                plain = acc.kind in ("load", "store") and not bits & A_ATOMIC
                checks.append(S.Check(i, k, ptr, bool(bits & (A_WRITE | A_ATOMIC)), plain, r.kind, acc.size, bits,
                                      site, self._object_args(r)))
        info.tg_variant, edges = tg_invariant(
            fn, [(ptr, "" if acc.size.isdigit() else acc.size) for _, acc, roots in accesses
                 for (ptr, _), r in zip(acc.ptrs, roots) if r.kind in ("tg", "tgp")],
            any(r.kind == "unknown" for _, _, roots in accesses for r in roots), info.written, info.writes_unknown)
        if not info.tg_variant:
            info.edges = [self._edge(analysis, fn, e) for e in edges]
            if None in info.edges:
                info.tg_variant, info.edges = "a branch on the group's position the analysis cannot follow", []
        fences = any(FENCE_MARKER in ln for ln in flines)
        if fences:
            info.uses.add("fence")
        summaries = S.plan(flines, fn.defs, fn.g, fn.lin, checks) if summarise_loops() else S.Plan()
        info.summaries = len(summaries.before_line)
        by_access: dict[int, list[S.Check]] = {}
        for c in checks:
            by_access.setdefault(c.line, []).append(c)
        for i, acc, roots in accesses:
            mine = {c.slot: c for c in by_access.get(i, [])}
            if not mine:
                continue
            pre: list[str] = []
            new_ptrs = []
            for k, r in enumerate(roots):
                c = mine.get(k)
                if c is None:
                    new_ptrs.append(None)
                    continue
                self_tmp = self._tmp(fn)
                val = None
                if acc.stored and r.kind in ("buf", "tg", "tgp") and acc.size.isdigit() and int(acc.size) <= 64:
                    # The value goes along, so that a store leaving memory as
                    # it was is no access for racecheck (mk/check.h *_st);
                    # such stores are checked one by one, summarised or not.
                    val = f"%mk.val{len(entry_extra)}"
                    entry_extra.append(f"  {val} = alloca {acc.stored[0]}")
                    pre.append(f"  store {acc.stored[0]} {acc.stored[1]}, ptr {val}")
                clean = None if val else summaries.clean.get((i, k))
                call = self._check_call(fn, r, c.ptr, acc.size, c.bits, c.site, shadow_of, clean, val)
                pre.append(f"  {self_tmp} = call ptr {call}")
                new_ptrs.append(self_tmp)
            post = []
            if fences and acc.info_bits & A_ATOMIC and roots[0].kind in ("buf", "unknown") and new_ptrs[0]:
                post.append(f"  call void @__mk_chk_acquire(ptr {fn.g}, i32 {fn.lin}, ptr {new_ptrs[0]})")
            out[i] = "\n".join(pre + [self._rewrite(fn, flines[i], acc, new_ptrs)] + post)
        # Markers: sites into their constant operands; binding markers into loads.
        for i, ln in enumerate(out):
            if i == 0 or i == len(out) - 1:
                continue
            if "@__mk_sync_barrier(" in ln:
                out[i] = self._barrier_site(ln)
            elif "@__mk_sync_simd(" in ln:
                out[i] = self._simd_site(ln)
            elif "@__mk_chk_buffer(" in ln or "@__mk_chk_tgparam(" in ln:
                out[i] = self._binding_load(fn, ln)
            elif FENCE_MARKER in ln:
                kind = re.search(r"@__mk_chk_fence_marker\(i32 (?:noundef )?(\d+)\)", ln)
                out[i] = f"  call void @__mk_chk_fence(ptr {fn.g}, i32 {fn.lin}, i32 {kind.group(1) if kind else 3})"
            elif re.search(r"\bcall\b", ln) and not MEMORY_INTRINSICS.search(ln):
                self._note_call(ln, info)
        S.apply(out, summaries)
        if entry_extra:
            # after the entry block's label, when it has one (a named
            # entry block: '_Z11ndtri_valuef.exit:'), and its allocas
            k = 1
            while k < len(out) - 1 and not out[k].strip():
                k += 1
            if k < len(out) - 1 and _LABEL_LINE.match(out[k]):
                k += 1
            while k < len(out) - 1 and re.match(rf"\s*{_LOCAL} = alloca ", out[k]):
                k += 1
            out[k:k] = entry_extra
        return out

    @staticmethod
    def _edge(analysis: Analysis, fn: Function, cond: str) -> dict | None:
        """An edge condition (check/invariant.py) as polynomials: lhs pred rhs."""
        m = re.match(r"icmp (?:samesign )?(\w+) i(\d+) (\S+), (\S+)$", re.sub(r",\s*!\w+ !\d+", "", fn.defs[cond]))
        if not m:
            return None
        a, b = analysis.value(m.group(3)), analysis.value(m.group(4))
        if a is None or b is None:
            return None
        return {"pred": m.group(1), "bits": int(m.group(2)), "lhs": Offset(*a).to_json(), "rhs": Offset(*b).to_json()}

    def _describe(self, fn: Function, accesses, info: KernelInfo) -> Analysis:
        """The facts check/session.py proves dispatches with (check/affine.py)."""
        written = {r.index for _, acc, roots in accesses for (_, rw), r in zip(acc.ptrs, roots)
                   if r.kind == "buf" and (rw == "write" or acc.info_bits & (A_WRITE | A_ATOMIC))}
        blocks = Blocks(fn.lines)
        analysis = Analysis(fn.defs, fn.params, self.layout, uniform_buffers=set(range(64)) - written,
                            root_of=fn.root, blocks=blocks, loops=info.loops, bounded=info.bounded)
        guards = Guards(blocks, fn.defs)
        for line, acc, roots in accesses:
            if acc.kind == "atomic" or acc.info_bits & A_ATOMIC:
                info.uses.add("atomic")
            for (ptr, rw), r in zip(acc.ptrs, roots):
                kind = {"tg": "threadgroup", "tgp": "threadgroup", "priv": "private", "unknown": "unknown"}.get(r.kind)
                if kind:
                    info.uses.add(kind)
                if r.kind not in ("buf", "glob"):
                    continue
                entry = {"root": r.kind, "index": r.index, "object_size": r.size,
                         "size": int(acc.size) if acc.size.isdigit() else None, "align": acc.elem_align,
                         "write": rw == "write" or bool(acc.info_bits & (A_WRITE | A_ATOMIC)), "offset": None}
                p = analysis.pointer(ptr) if entry["size"] is not None else None
                if p is not None and _same_value(p[0], r, fn):
                    entry["offset"] = Offset(p[1][0], p[1][1]).to_json()
                    entry["guards"] = self._guards(analysis, guards, blocks.block_at[line])
                info.accesses.append(entry)
        if any(re.search(r"@__mk_sync_(barrier|simd)\(", ln) for ln in fn.lines):
            info.uses.add("sync")
        if any("@__mk_sync_simd(" in ln for ln in fn.lines):
            info.uses.add("simd")
        return analysis

    @staticmethod
    def _guards(analysis: Analysis, guards: Guards, block: str) -> list:
        """The comparisons (check/guards.py) that hold where an access runs,
        as offset polynomials: lhs < rhs ("strict") or lhs <= rhs."""
        out = []
        for lhs, pred, rhs, bits in guards.at(block):
            a, b = analysis.value(lhs), analysis.value(rhs)
            if a is None or b is None:
                continue
            if pred in ("ule", "sle"):
                b = (add(b[0], const(1)), b[1])
            out.append({"lhs": Offset(*a).to_json(), "rhs": Offset(*b).to_json(),
                        "signed": pred[0] == "s", "bits": bits})
        return out

    def _tmp(self, fn: Function) -> str:
        fn.tmp += 1
        return f"%mk.chk{fn.tmp}"

    def _check_call(self, fn: Function, r: Root, ptr: str, size: str, bits: int, site: int,
                    shadow_of: dict[str, str], clean: str | None = None, val: str | None = None) -> str:
        """The check in front of an access; `clean`: a summarised loop's
        flag (the *_in variant, skipped when the loop's ranges were clean);
        `val`: where a plain store's value waits (the *_st variant)."""
        common = f"ptr {fn.g}, i32 {fn.lin}, ptr {ptr}, i64 {size}, i32 {bits}, i32 {site}"
        if r.kind == "priv":
            sh = shadow_of.get(r.base, "null")
            name, args = "priv", f"{common}, ptr {r.base}, i64 {r.size}, ptr {sh}"
        else:
            name = {"buf": "buf", "tg": "tg", "tgp": "tg", "glob": "glob"}.get(r.kind, "any")
            args = f"{common}, {self._object_args(r)}" if name != "any" else common
        if val is not None:
            return f"@__mk_chk_{name}_st({args}, ptr {val})"
        if clean is not None:
            return f"@__mk_chk_{name}_in(i1 {clean}, {args})"
        return f"@__mk_chk_{name}({args})"

    def _object_args(self, r: Root) -> str:
        """The arguments naming the object in a buffer, threadgroup or
        constant check (and its range check); "" for the others."""
        if r.kind == "buf":
            return f"i32 {r.index}"
        if r.kind == "tg":
            return f"ptr {r.base}, i64 {r.size}, i32 {r.index}"
        if r.kind == "tgp":
            return f"ptr null, i64 0, i32 {r.index}"
        if r.kind == "glob":
            nm = _name(r.base)
            if nm not in self.global_names:
                self.global_names.append(nm)
            return f"ptr {r.base}, i64 {r.size}, i32 {self.global_names.index(nm)}"
        return ""

    def _rewrite(self, fn: Function, text: str, acc: Access, new_ptrs: list[str | None]) -> str:
        dm = _DEF.match(text)
        head = text[:dm.end()] if dm else "  "
        body = _DBG_STRIP.sub("", text[dm.end():] if dm else text.strip())
        if acc.kind in ("copy", "set"):
            c = parse_call(body)
            args = [f"{t} {v}" for t, v in c.args]
            if acc.kind == "set":
                if new_ptrs[0] is None:
                    return text
                ok = self._tmp(fn)
                n2 = self._tmp(fn)
                args[0] = f"ptr {new_ptrs[0]}"
                pre = [f"  {ok} = icmp eq ptr {new_ptrs[0]}, {c.args[0][1]}",
                       f"  {n2} = select i1 {ok}, {c.args[2][0]} {c.args[2][1]}, {c.args[2][0]} 0"]
                args[2] = f"{c.args[2][0]} {n2}"
            else:
                src = new_ptrs[0] or c.args[1][1]
                dst = new_ptrs[1] or c.args[0][1]
                ok1, ok2, ok, n2 = (self._tmp(fn) for _ in range(4))
                pre = [f"  {ok1} = icmp eq ptr {src}, {c.args[1][1]}",
                       f"  {ok2} = icmp eq ptr {dst}, {c.args[0][1]}",
                       f"  {ok} = and i1 {ok1}, {ok2}",
                       f"  {n2} = select i1 {ok}, {c.args[2][0]} {c.args[2][1]}, {c.args[2][0]} 0"]
                args[0] = f"ptr {dst}"
                args[1] = f"ptr {src}"
                args[2] = f"{c.args[2][0]} {n2}"
            return "\n".join(pre + [f"  call void {c.callee}({', '.join(args)})"])
        # load / store / atomics: replace the pointer operand in place
        old = acc.ptrs[0][0]
        new = new_ptrs[0]
        if new is None:
            return text
        if acc.kind == "atomic" and body.startswith("cmpxchg"):
            pattern = re.compile(r"(ptr\s+)" + re.escape(old) + _END)
        elif acc.kind == "atomic":
            pattern = re.compile(r"(\s+ptr\s+)" + re.escape(old) + _END)
        else:
            pattern = re.compile(r"(,\s*ptr\s+(?:noundef\s+)?)" + re.escape(old) + _END)
        new_body, n = pattern.subn(lambda m: m.group(1) + new, body, count=1)
        if n != 1:
            raise Unsupported(f"cannot rewrite the pointer of {body[:80]!r}")
        return head + new_body

    def _trackable_allocas(self, fn: Function, roots: list[Root]) -> list[Root]:
        """Private arrays whose every use is a load, store, copy or address
        computation (no escape into calls or memory): their initialisation
        is tracked."""
        out = []
        for r in dict.fromkeys(x for x in roots if x.kind == "priv"):
            derived = {r.base}
            changed = True
            while changed:
                changed = False
                for name, d in fn.defs.items():
                    if name in derived:
                        continue
                    op = d.split(None, 1)[0]
                    if op in ("getelementptr", "phi", "select", "bitcast", "addrspacecast") and \
                            any(re.search(re.escape(x) + _END, d) for x in derived):
                        derived.add(name)
                        changed = True
            escapes = False
            for ln in fn.lines[1:-1]:
                body = _DBG_STRIP.sub("", ln)
                dm = _DEF.match(body)
                rhs = body[dm.end():] if dm else body.strip()
                used = [x for x in derived if re.search(re.escape(x) + _END, rhs)]
                if not used or (dm and dm.group(1) in derived and rhs.split(None, 1)[0] in
                                ("getelementptr", "phi", "select", "bitcast", "addrspacecast")):
                    continue
                op = rhs.split(None, 1)[0]
                if op == "load":
                    continue
                if op == "store":
                    parts = _split_top(re.sub(r"^store\s+(atomic\s+)?(volatile\s+)?", "", rhs))
                    if any(re.search(re.escape(x) + _END, parts[0]) for x in used):
                        escapes = True  # the address itself is stored
                    continue
                if op in ("call", "tail") and re.search(r"@llvm\.(lifetime|memset|memcpy|memmove)", rhs):
                    continue
                if rhs.startswith("icmp"):
                    continue
                escapes = True
            if not escapes:
                out.append(r)
        return out

    def _barrier_site(self, ln: str) -> str:
        site = self.site(ln, "barrier")
        m = re.search(r"(@__mk_sync_barrier\(i32 (?:noundef )?)(-?\d+)", ln)
        if not m:
            return ln
        value = (int(m.group(2)) & 0xff) | (site << 16)
        return ln[:m.start(2)] + str(_i32(value)) + ln[m.end(2):]

    def _simd_site(self, ln: str) -> str:
        site = self.site(ln, "simd")
        m = re.search(r"@__mk_sync_simd\(", ln)
        close = _match_paren(ln, m.end() - 1)
        args = _split_top(ln[m.end():close])
        if len(args) != 8:
            return ln
        opm = re.match(r"(i32 (?:noundef )?)(-?\d+)$", args[3].strip())
        argm = re.match(r"(i32 (?:noundef )?)(-?\d+)$", args[2].strip())
        if not opm:
            return ln
        op = int(opm.group(2)) & 0xff
        flags = int(argm.group(2)) & 0xff if (op == SIMD_BARRIER_OP and argm) else 0
        args[3] = f"{opm.group(1)}{_i32(op | (flags << 8) | (site << 16))}"
        return ln[:m.end()] + ", ".join(args) + ln[close:]

    def _binding_load(self, fn: Function, ln: str) -> str:
        return binding_load(ln, self._tmp(fn))

    def _note_call(self, ln: str, info: KernelInfo):
        body = _DBG_STRIP.sub("", ln)
        dm = _DEF.match(body)
        try:
            c = parse_call(body[dm.end():] if dm else body.strip())
        except Unsupported:
            return
        if not c.callee.startswith("@"):
            return
        name = _name(c.callee)
        if name.startswith(("llvm.", "__mk")) or name not in self.mod.functions:
            return
        if any(t.startswith("ptr") for t, _ in c.args):
            info.unchecked_calls.append(name)


def summarise_loops() -> bool:
    """Loop summaries (check/summarise.py) are on unless
    METAL_KERNEL_CHECK_SUMMARIES=0 (a way to compare them with the
    access-by-access checks)."""
    return os.environ.get("METAL_KERNEL_CHECK_SUMMARIES", "1") != "0"


def _same_value(base: str, r: Root, fn: Function) -> bool:
    """Whether `base` is the root object's own pointer."""
    if r.kind == "glob":
        return base == r.base
    d = fn.defs.get(base, "")
    return r.kind == "buf" and "@__mk_chk_buffer(" in d and re.search(rf",\s*i32 (?:noundef )?{r.index}\)", d) is not None


def binding_load(ln: str, tmp: str) -> str:
    """`%b = call ptr @__mk_chk_buffer(ptr %g, i32 i)` -> the load from the
    WiGroup it stands for (`tmp`: a fresh name for the address)."""
    dm = _DEF.match(ln)
    body = _DBG_STRIP.sub("", ln[dm.end():] if dm else "")
    c = parse_call(body)
    vals = [v for _, v in c.args]
    if not dm or len(vals) != 2 or not vals[1].isdigit():
        raise Unsupported("unexpected binding marker")
    base = WIGROUP_BUFFERS if _name(c.callee) == "__mk_chk_buffer" else WIGROUP_TG_BUFFERS
    return (f"  {tmp} = getelementptr inbounds i8, ptr {vals[0]}, i64 {base + 8 * int(vals[1])}\n"
            f"  {dm.group(1)} = load ptr, ptr {tmp}, align 8")


def _bindings_only(lines: list[str]) -> list[str]:
    """A per-thread function the pass could not instrument: its binding
    markers become loads (it runs unchecked)."""
    out = []
    for k, ln in enumerate(lines):
        if "@__mk_chk_buffer(" in ln or "@__mk_chk_tgparam(" in ln:
            ln = binding_load(ln, f"%mk.bind{k}")
        out.append(ln)
    return out


def _match_paren(s: str, i: int) -> int:
    depth = 0
    for j in range(i, len(s)):
        if s[j] == "(":
            depth += 1
        elif s[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise Unsupported("unbalanced parentheses")


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _log2(v: int) -> int:
    return max(v, 1).bit_length() - 1


def instrument(text: str, symbols: list[int], runtime_dirs: tuple[str, ...] = ()) -> Result:
    """Instruments the per-thread functions of `symbols` in `text`."""
    if not runtime_dirs:  # the runtime's headers and the CUDA front end's (a site in them is the caller's)
        pkg = Path(__file__).resolve().parents[1]
        runtime_dirs = (str(pkg / "runtime" / "include"), str(pkg / "port" / "include"))
    return Instrumenter(text, symbols, runtime_dirs).run()


def describe(text: str, symbols: list[int]) -> dict[int, KernelInfo]:
    """The dispatch-time facts (accesses as offset polynomials, loops,
    guards, what is written) of the per-thread functions of `symbols` in
    `text`, without instrumenting them: what the runtime proves a
    dispatch's stores in bounds with (runtime/store_guard.py)."""
    inst = Instrumenter.__new__(Instrumenter)
    inst.mod = Module(text)
    inst.layout = Layout(inst.mod.types)
    inst.globals = {}
    for ln in inst.mod.lines:
        m = re.match(rf"^({_GLOBAL}) = ", ln)
        if m:
            inst.globals[_name(m.group(1))] = ln
    out = {}
    for sym in symbols:
        fname = f"__mk_wi_{sym}"
        if fname not in inst.mod.functions:
            continue
        a, b = inst.mod.functions[fname]
        info = KernelInfo()
        try:
            fn = Function(inst.mod.lines[a:b + 1], inst.layout, inst.globals)
            accesses = []
            for i, ln in enumerate(fn.lines[1:-1], start=1):
                try:
                    acc = _access(ln, inst.layout)
                except (Unsupported, IndexError, ValueError):
                    acc = None
                if acc is not None:
                    accesses.append((i, acc, [fn.root(p) for p, _ in acc.ptrs]))
            inst._describe(fn, accesses, info)
            for _, acc, roots in accesses:
                for (_, rw), r in zip(acc.ptrs, roots):
                    writes = rw == "write" or acc.info_bits & (A_WRITE | A_ATOMIC)
                    if writes and r.kind == "buf":
                        info.written.add(r.index)
                    elif writes and r.kind == "unknown":
                        info.writes_unknown = True
        except Unsupported as e:
            info.not_instrumented = str(e)
        out[sym] = info
    return out


def functions_to_inline(text: str, symbols: list[int]) -> set[str]:
    """Defined functions (not the runtime's) the per-thread functions still
    call: the checked build inlines them, so their accesses are checked."""
    mod = Module(text)
    out = set()
    for sym in symbols:
        fname = f"__mk_wi_{sym}"
        if fname not in mod.functions:
            continue
        a, b = mod.functions[fname]
        for ln in mod.lines[a + 1:b]:
            for tok in re.findall(r"call [^@]*(" + _GLOBAL + r")\(", ln):
                nm = _name(tok)
                if nm in mod.functions and not nm.startswith(("llvm.", "__mk")):
                    out.add(nm)
    return out
