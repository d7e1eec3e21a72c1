"""Emitting a kernel's data layout: the per-thread slot arrays, the stage
block of uniform values and the private frames (as IR types), and the
descriptor the group driver reads (mk/workitem/descriptor.h, WiKernel)."""

from __future__ import annotations

import re

from ..ir import Unsupported, parse_type
from .abi import MAX_THREADS
from .analysis import Analysis
from .ir_model import Function

# Uniform::affine (mk/workitem/descriptor.h): the staged value is the thread's value
# minus its x or lin (a loop counter at its resume point), or minus its x,
# lin or y (uniformity.affine_values, at any point); INVARIANT: a
# value from before the loop of a resume point, which the stage still holds
# when the same threads come back to the point.
AFFINE = {"": 0, "x": 1, "lin": 2, "y": 3}
INVARIANT = 4
# RUN_INVARIANT: every thread of a call of each region that reaches the
# point saves the same bits (run_invariance.py): for threads that all left
# one call there, the driver copies the first thread's bits unchecked.
RUN_INVARIANT = 8
from .prefix_guard import Guard


def types_text(fn: Function, analysis: Analysis) -> list[str]:
    """The kernel's slot, stage and frame types."""
    n = fn.sym
    # Each array a little longer than 1024 entries: element t of every
    # array would otherwise sit at the same offset modulo 4 KiB, and a
    # region loading one thread's value right after storing another's
    # waits on the store (4K aliasing: x86 cores compare the address's
    # low 12 bits first). 64 bytes more per array spreads them.
    fields = [f"[{MAX_THREADS + _padding(analysis.types[v])} x {analysis.types[v]}]" for v in analysis.slot_values]
    has_simd = any(sp.kind == "simd" for sp in fn.syncs)
    max_in = fn.in_stride if has_simd else 0
    max_out = fn.out_stride if has_simd else 0
    fields.append(f"[{(MAX_THREADS * max_in + 15) // 16} x <16 x i8>]")
    fields.append(f"[{(MAX_THREADS * max_out + 15) // 16} x <16 x i8>]")
    fields.append(f"[{MAX_THREADS} x i32]")
    out = [f"%mk.slots.{n} = type {{ {', '.join(fields)} }}"]
    st = [analysis.types[v] for v in analysis.uniform] or ["i8"]
    out.append(f"%mk.stage.{n} = type {{ {', '.join(st)} }}")
    if analysis.private:
        pf = []
        for a in analysis.private:
            ins = next(i for i in fn.blocks[fn.entry].insts if i.name == a)
            m = re.match(r"alloca\s+(inalloca\s+)?", ins.rest)
            s = ins.rest[m.end():]
            t, j = parse_type(s, 0)
            rest = s[j:]
            cnt = re.match(r"\s*,\s*(i\d+)\s+(\d+)", rest)
            if cnt:
                t = f"[{cnt.group(2)} x {t}]"
            elif re.match(r"\s*,\s*i\d+\s+%", rest):
                raise Unsupported("alloca with a variable count")
            al = re.search(r"align (\d+)", rest)
            align = int(al.group(1)) if al else 16
            pf.append(f"{{ [0 x <{max(align, 1)} x i8>], {t} }}")
        out.append(f"%mk.frame.{n} = type {{ {', '.join(pf)} }}")
    return out


def descriptor_text(fn: Function, analysis: Analysis, guards: dict[int, Guard] | None = None) -> list[str]:
    """The kernel's descriptor for the group driver and its entry
    `__mk_wientry_<n>`. `guards[k]`: the guard of the region from point k
    (prefix_guard.py), for the driver's other orders (mk/workitem.h,
    settle_idle)."""
    n = fn.sym
    S = f"%mk.slots.{n}"
    T = f"%mk.stage.{n}"

    def off(ty, i):
        return f"i64 ptrtoint (ptr getelementptr ({ty}, ptr null, i32 0, i32 {i}) to i64)"

    def size(ty):
        return f"i64 ptrtoint (ptr getelementptr ({ty}, ptr null, i32 1) to i64)"

    slot_idx = {v: i for i, v in enumerate(analysis.slot_values)}
    stage_idx = {v: i for i, v in enumerate(analysis.uniform)}
    uniforms = []
    guards = guards or {}
    syncs = [f"%mk.WiSync {{ i32 0, i32 0, i32 0, i32 0, ptr null, ptr null, i32 0, i32 0, {_guard(guards.get(0))} }}"]
    for k, sp in enumerate(fn.syncs, 1):
        first = len(uniforms)
        for v in sp.live:
            if v in stage_idx and analysis.staged_at(sp, v):
                anywhere = sp.kind == "point" or v in analysis.affine_any
                affine = AFFINE.get(analysis.affine.get(v, "") if anywhere else "", 0)
                loop = fn.point_loops.get(sp.block) if sp.kind == "point" else None
                if loop is not None and v not in analysis.affine and fn.defs[v].block not in loop:
                    affine |= INVARIANT
                if (sp.id, v) in analysis.run_invariant:
                    affine |= RUN_INVARIANT
                uniforms.append(f"%mk.WiUniform {{ {off(S, slot_idx[v])}, {off(T, stage_idx[v])}, "
                                f"{size(analysis.types[v])}, i64 {affine} }}")
        kind = {"barrier": 1, "simd": 2, "point": 3}[sp.kind]
        comp = sp.compute if sp.kind == "simd" else "null"
        dense = sp.dense if sp.kind == "simd" else "null"
        syncs.append(f"%mk.WiSync {{ i32 {kind}, i32 {sp.op}, i32 {sp.in_size}, i32 {sp.out_size}, "
                     f"ptr {comp}, ptr {dense}, i32 {first}, i32 {len(uniforms) - first}, {_guard(guards.get(k))} }}")
    out = [f"@__mk_wisyncs_{n} = internal constant [{len(syncs)} x %mk.WiSync] [{', '.join(syncs)}]"]
    if uniforms:
        out.append(f"@__mk_wiunif_{n} = internal constant [{len(uniforms)} x %mk.WiUniform] "
                   f"[{', '.join(uniforms)}]")
        unif_ref = f"@__mk_wiunif_{n}"
    else:
        unif_ref = "null"
    if fn.tg_allocs:
        tg = ", ".join(f"%mk.WiTg {{ i64 {a}, i64 {b}, i64 {c} }}" for a, b, c in fn.tg_allocs)
        out.append(f"@__mk_witg_{n} = internal constant [{len(fn.tg_allocs)} x %mk.WiTg] [{tg}]")
        tg_ref = f"@__mk_witg_{n}"
    else:
        tg_ref = "null"
    frame = size(f"%mk.frame.{n}") if analysis.private else "i64 0"
    nf = len(analysis.slot_values)
    out.append(
        f"@__mk_widesc_{n} = internal constant %mk.WiKernel {{ ptr @__mk_wiloop_{n}, "
        f"ptr @__mk_wisyncs_{n}, i64 {len(syncs)}, ptr {unif_ref}, ptr {tg_ref}, i64 {len(fn.tg_allocs)}, "
        f"{size(S)}, {size(T)}, {frame}, {off(S, nf)}, {off(S, nf + 1)}, {off(S, nf + 2)}, "
        f"i64 {fn.in_stride}, i64 {fn.out_stride}, "
        f"ptr {'@__mk_sgu_' + str(n) if fn.whole_simdgroup else 'null'} }}")
    attr = f" #{fn.attr_group}" if fn.attr_group else ""
    out += [
        f"define void @__mk_wientry_{n}(ptr %r){attr} {{",
        f"  tail call void @__mk_wi_run_group(ptr %r, ptr @__mk_widesc_{n}, ptr @__mk_entry_{n})",
        "  ret void",
        "}",
        "",
    ]
    return out


# Sync::guard (mk/workitem/descriptor.h): 0 none, 1 on the thread's index, 2 on its x.
_GUARD_COORD = {"lin": 1, "x": 2}


def _guard(g: Guard | None) -> str:
    """A region's guard in its Sync: coordinate, bound, the idle threads' state (and padding)."""
    if g is None:
        return "i32 0, i32 0, i32 0, i32 0"
    return f"i32 {_GUARD_COORD[g.coord]}, i32 {g.below}, i32 {g.state}, i32 0"


_SCALAR_BYTES = {"half": 2, "bfloat": 2, "float": 4, "double": 8, "ptr": 8}


def _bytes(t: str) -> int | None:
    """Size of a first-class IR type, or None when this does not know it."""
    t = t.strip()
    if t in _SCALAR_BYTES:
        return _SCALAR_BYTES[t]
    if m := re.fullmatch(r"i(\d+)", t):
        return max(1, int(m.group(1)) // 8)
    if m := re.fullmatch(r"<(\d+) x (.+)>", t):
        e = _bytes(m.group(2))
        return None if e is None else int(m.group(1)) * e
    if m := re.fullmatch(r"\[(\d+) x (.+)\]", t):
        e = _bytes(m.group(2))
        return None if e is None else int(m.group(1)) * e
    return None


def _padding(t: str) -> int:
    """Elements of type `t` that make 64 bytes (at least one)."""
    size = _bytes(t)
    return max(1, 64 // size) if size else 1
