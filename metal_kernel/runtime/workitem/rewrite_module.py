"""The whole-module pass: every per-thread function of a library's IR cut
into step functions, a loop function and a descriptor (per_thread.py), the
per-thread functions dropped, the markers aliased to their fiber-mode
bodies, and the shared types, declarations and attribute groups added."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..ir import _GLOBAL, Module, Unsupported, _gref, _name, _split_top, _strip_attrs, parse_type
from .abi import ALL_MARKERS, FIBER_PREFIX, SYNC_MARKERS, THREAD_INDEX
from .pair_bitcasts import fold_pair_bitcasts
from .per_thread import PerThread

# Flags for compiling the transformed module. Region loops branch on values
# that are the same for every thread of a run (a loop counter read from the
# stage block, `t + 16 < N`): clang at -O2 turns such a branch inside the
# vectorised loop into masks on every store (an AVX-512 masked store to C
# that never happens, on every row of every tile of a matmul); unswitching
# makes one plain loop per outcome (the benchmark's 16x16-tiled matmul:
# ~25% less time). The threshold is the loop size unswitching may
# duplicate: LLVM's default (50) is below a jammed loop's
# (emit_loop._jammed_rows, four copies of the step) even for a small
# kernel, whose uniform branch then became masked loads and stores again.
CODEGEN_FLAGS = ("-mllvm", "-enable-nontrivial-unswitch", "-mllvm", "-unswitch-threshold=500")




def _sync_functions(mod: Module, markers=SYNC_MARKERS) -> set[str]:
    """Defined functions that may reach one of `markers` (by default the
    synchronising ones)."""
    return mod.reaching(markers, FIBER_PREFIX)


@dataclass
class Result:
    text: str
    modes: dict[int, str]
    reasons: dict[int, str]
    force_inline: set[str]


def transform(text: str, symbols: list[int], debug: bool = False, every_kernel: bool = False,
              uniform=frozenset(), row_jam: int = 1, jam_interleave: int = 1, loop_points: bool = False) -> Result:
    """Cuts every per-thread function of `text` that it can. Returns the new
    module text and, per kernel symbol, "workitem-loops", "fibers" or
    "direct" (never synchronises). `every_kernel` gives kernels that never
    synchronise work-item loops too (one region): checked builds run every
    kernel through the group driver, which holds the checker's hooks.
    `uniform`: kernels with a whole-simdgroup function `__mk_sgu_<n>`
    (runtime/simdgroup_uniform.py), which their descriptors name.
    `row_jam`, `jam_interleave`: rows of a 2-D group run together and the
    vectoriser's interleave count there (emit_loop._jammed_rows); 1 (off)
    for checked builds, whose code is larger and compiled per check.
    `loop_points`: resume points in strided loops (loop_points.py); off for
    checked builds, whose driver takes every point for a barrier."""
    mod = Module(fold_pair_bitcasts(text))
    sync_funcs = _sync_functions(mod)
    # Functions that ask the runtime which thread is running (simdgroup
    # matrix loads/stores ask for the lane): such a kernel never
    # synchronises but needs the tracked loop, "direct-tracked".
    lane_funcs = _sync_functions(mod, (THREAD_INDEX,))
    modes: dict[int, str] = {}
    reasons: dict[int, str] = {}
    force_inline: set[str] = set()
    generated: list[str] = []
    type_lines: list[str] = []
    remove: list[str] = []
    groups = AttributeGroups(mod)
    for sym in symbols:
        fname = f"__mk_wi_{sym}"
        if fname not in mod.functions:
            modes[sym] = "fibers"
            reasons[sym] = "no per-thread function"
            continue
        remove.append(fname)
        pt = PerThread(mod, sym, sync_funcs, sym in uniform, row_jam, loop_points)
        try:
            pt.parse()
            if not every_kernel and not pt.synchronises():
                asks_lane = THREAD_INDEX in mod.globals_referenced(fname) or \
                    bool(mod.globals_referenced(fname) & lane_funcs)
                modes[sym] = "direct-tracked" if asks_lane else "direct"
                continue
            pt.cut_and_analyse()
            g = pt.attr_group
            pt.ai_group = groups.step_group(g)
            pt.loop_group = groups.loop_group(g)
            gen = pt.emit_all()
        except Unsupported as e:
            modes[sym] = "fibers"
            reasons[sym] = str(e)
            force_inline |= pt.force_inline
            continue
        except Exception as e:  # a surprise in the IR: stay on fibers
            if debug:
                raise
            modes[sym] = "fibers"
            reasons[sym] = f"internal: {type(e).__name__}: {e}"
            continue
        type_lines += gen[0]
        generated += gen[1]
        modes[sym] = "workitem-loops"
    lines = _kept_lines(mod, remove)
    header = [
        "%mk.WiSync = type { i32, i32, i32, i32, ptr, ptr, i32, i32, i32, i32, i32, i32 }",
        "%mk.WiUniform = type { i64, i64, i64, i64 }",
        "%mk.WiTg = type { i64, i64, i64 }",
        "%mk.WiKernel = type { ptr, ptr, i64, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, ptr }",
    ] + type_lines
    decls = _declarations(mod, uniform, modes) if generated else []
    # Types go after the module header lines (target triple / datalayout).
    insert_at = 0
    for i, ln in enumerate(lines):
        if ln.startswith(("target ", "source_filename", "; ModuleID")):
            insert_at = i + 1
    out = lines[:insert_at] + [""] + header + [""] + lines[insert_at:] + [""] + generated + decls + groups.lines
    return Result(_number_loop_metadata("\n".join(out) + "\n", jam_interleave), modes, reasons, force_inline)


_PLACEHOLDER = re.compile(r"!mk\.(ag\.\d+|lp\.\d+\.\d+\.[a-z])\b")


def _number_loop_metadata(text: str, jam_interleave: int = 1) -> str:
    """The loop functions' metadata placeholders (emit_loop.access_group,
    parallel_loop) as nodes numbered after the module's own: an access
    group per kernel (`distinct !{}`), and per thread loop a distinct loop
    node with llvm.loop.parallel_accesses over its kernel's group; the
    jammed loops' (emit_loop._jammed_rows) with llvm.loop.interleave.count
    `jam_interleave` when above 1."""
    names = list(dict.fromkeys(m.group(1) for m in _PLACEHOLDER.finditer(text)))
    if not names:
        return text
    used = [int(m) for m in re.findall(r"!(\d+)\b", text)]
    nxt = max(used, default=-1) + 1
    ids: dict[str, int] = {}
    defs: list[str] = []
    for name in sorted(names, key=lambda x: not x.startswith("ag.")):  # groups first
        ids[name] = nxt
        if name.startswith("ag."):
            defs.append(f"!{nxt} = distinct !{{}}")
            nxt += 1
        else:
            group = ids.get("ag." + name.split(".")[1])
            props = [f'!"llvm.loop.parallel_accesses", !{group}', '!"llvm.loop.vectorize.enable", i1 true']
            if jam_interleave > 1 and name.endswith(".j"):
                props.append(f'!"llvm.loop.interleave.count", i32 {jam_interleave}')
            refs = ", ".join(f"!{nxt + 1 + i}" for i in range(len(props)))
            defs.append(f"!{nxt} = distinct !{{!{nxt}, {refs}}}")
            defs += [f"!{nxt + 1 + i} = !{{{p}}}" for i, p in enumerate(props)]
            nxt += 1 + len(props)
    text = _PLACEHOLDER.sub(lambda m: f"!{ids[m.group(1)]}", text)
    return text + "\n".join(defs) + "\n"


class AttributeGroups:
    """The attribute groups the generated functions get, made from the
    per-thread function's group `g` (one pair per distinct `g`, numbered
    after the module's own): the step functions' (alwaysinline: each is
    inlined into the loop) and the loop function's (preferring no scatter).
    Both drop what the cut makes untrue (_returning). `lines` holds the new
    groups' definitions."""

    def __init__(self, mod: Module):
        self.mod = mod
        self.steps: dict[str, str] = {}
        self.loops: dict[str, str] = {}
        self.lines: list[str] = []
        self.next = max([int(k) for k in mod.attr_groups] + [0]) + 1

    def step_group(self, g: str | None) -> str | None:
        if g and g not in self.steps and g in self.mod.attr_groups:
            body = self.mod.attr_groups[g]
            body = re.sub(r"\b(noinline|optnone|alwaysinline)\b", "", _returning(body))
            self.steps[g] = str(self.next)
            self.lines.append(f"attributes #{self.next} = {{ alwaysinline {body.strip()} }}")
            self.next += 1
        return self.steps.get(g) if g else None

    def loop_group(self, g: str | None) -> str | None:
        if g and g not in self.loops and g in self.mod.attr_groups:
            self.loops[g] = str(self.next)
            self.lines.append(
                f"attributes #{self.next} = {{ {_no_scatter(_returning(self.mod.attr_groups[g])).strip()} }}")
            self.next += 1
        return self.loops.get(g) if g else None


def _returning(body: str) -> str:
    """The kernel's attributes without what the cut makes untrue: a kernel
    that loops forever is `noreturn`, but its step functions return at every
    synchronisation point (and its loop function after every region)."""
    return re.sub(r"\b(noreturn|mustprogress|willreturn)\b", "", body)


def _no_scatter(body: str) -> str:
    """The attributes of a loop function: those of the kernel, preferring
    no scatter. In a region loop the vectoriser turns a store to a
    thread-uniform address under a per-thread condition (`if (lane == 0)
    partials[sg] = s;`) into a masked scatter per vector of threads, which
    costs ~20 cycles even with one lane set (Zen 4/5); stores it cannot
    vectorise otherwise are predicated per lane instead."""
    if "-prefer-no-scatter" in body:
        return body.replace("-prefer-no-scatter", "+prefer-no-scatter")
    if "prefer-no-scatter" in body:
        return body
    return re.sub(r'"target-features"="', '"target-features"="+prefer-no-scatter,', body, count=1)


def _kept_lines(mod: Module, remove: list[str]) -> list[str]:
    """The module's lines without the per-thread functions `remove` (their
    work is in the step functions), each marker declaration that has a
    fiber-mode body turned into an alias of it."""
    drop = set()
    for f in remove:
        a, b = mod.functions[f]
        drop.update(range(a, b + 1))
    lines = []
    for i, ln in enumerate(mod.lines):
        if i in drop:
            continue
        if ln.startswith("declare "):
            m = re.search(rf"({_GLOBAL})\(", ln)
            nm = _name(m.group(1)) if m else ""
            if nm in ALL_MARKERS and FIBER_PREFIX + nm[len("__mk_"):] in mod.functions:
                # The marker becomes an alias of its fiber-mode body.
                sig = _decl_type(ln, nm)
                lines.append(f"{_gref(nm)} = hidden alias {sig}, ptr {_gref(FIBER_PREFIX + nm[len('__mk_'):])}")
                continue
        lines.append(ln)
    return lines


def _declarations(mod: Module, uniform, modes: dict[int, str]) -> list[str]:
    """What the generated code calls and the module may not declare yet."""
    # Weak: null when the whole-simdgroup object is not linked after all.
    decls = [f"declare extern_weak hidden void @__mk_sgu_{s}(ptr, i32, i32, i32, i32)"
             for s in sorted(uniform) if modes.get(s) == "workitem-loops"]
    if "llvm.memcpy.p0.p0.i64" not in mod.declares:
        decls.append("declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)")
    if "llvm.umin.i32" not in mod.declares:
        decls.append("declare i32 @llvm.umin.i32(i32, i32)")
    if "llvm.umax.i32" not in mod.declares:
        decls.append("declare i32 @llvm.umax.i32(i32, i32)")
    return decls


def _decl_type(line: str, name: str) -> str:
    """'declare void @f(i32 noundef) #3' -> 'void (i32)'."""
    m = re.match(r"declare\s+(.*?)" + re.escape(_gref(name)) + r"\((.*)\)", line)
    pre = _strip_attrs(re.sub(r"\b(dso_local|hidden|protected|default|local_unnamed_addr|unnamed_addr|"
                              r"extern_weak|external)\b", "", m.group(1))).strip()
    ret, _ = parse_type(pre, 0)
    params = []
    for p in _split_top(m.group(2)):
        if p == "...":
            params.append("...")
            continue
        t, _ = parse_type(p, 0)
        params.append(t)
    return f"{ret} ({', '.join(params)})"
