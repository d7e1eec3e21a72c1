"""Uniformity: which saved values every thread of a group holds the same
(the driver checks that they agree, then serves them from one stage block,
which keeps them loop-invariant in the region loops)."""

from __future__ import annotations

import re

from ..dominators import immediate_dominators
from ..ir import _name
from .analysis import Analysis
from .ir_model import phi_incoming, reachable, same_value


def uniform_candidates(analysis: Analysis):
    """A simple divergence analysis: `analysis.varying` (values that may
    differ between threads) and `analysis.uniform` (the slot values that
    cannot, read from the stage block the driver fills once per run)."""
    fn = analysis.fn
    varying = {fn.x, fn.y, fn.z, fn.lin}
    private = set()
    for a in analysis.allocas:
        private |= analysis.derived.get(a, {a})
    reach_cache: dict[tuple[str, str | None], set[str]] = {}
    ipdom = _immediate_post_dominators(fn)

    def reach(s: str, stop: str | None = None) -> set[str]:
        """Blocks reachable from s, not going on past `stop` (a divergent
        branch's reconvergence point: joins after it are not its joins)."""
        if (s, stop) not in reach_cache:
            reach_cache[(s, stop)] = reachable([s], lambda b: () if b == stop else fn.blocks[b].succs)
        return reach_cache[(s, stop)]

    div_joins: set[str] = set()
    done_branches: set[str] = set()
    changed = True
    while changed:
        changed = False
        for lb in fn.order:
            blk = fn.blocks[lb]
            for ins in blk.insts:
                if ins.name is None or ins.name in varying:
                    continue
                v = False
                if ins.op == "phi":
                    inc = phi_incoming(ins)
                    # a varying incoming value, or distinct values meeting after a divergent branch
                    if any(nm in varying for val, _ in inc for _, nm in fn.locals.tokens(val)) or \
                            (lb in div_joins and len({val for val, _ in inc}) > 1):
                        v = True
                elif ins.op == "load":
                    v = any(u in varying or u in private for u in ins.uses)
                elif ins.op in ("atomicrmw", "cmpxchg", "alloca"):
                    v = ins.op != "alloca"
                elif ins.op == "call":
                    c = ins.call
                    callee = _name(c.callee) if c and c.callee.startswith("@") else ""
                    if callee.startswith(("llvm.memcpy", "llvm.memset")):
                        v = False
                    else:
                        v = any(u in varying or u in private for u in ins.uses)
                else:
                    v = any(u in varying for u in ins.uses)
                if v:
                    varying.add(ins.name)
                    changed = True
            # divergent branches
            if blk.insts and blk.sync == 0 and lb not in done_branches:
                t = blk.insts[-1]
                if t.op in ("br", "switch") and any(u in varying for u in t.uses) and len(blk.succs) > 1:
                    done_branches.add(lb)
                    for j in fn.order:
                        jb = fn.blocks[j]
                        if len(set(jb.preds)) < 2 or not jb.phis() or j in div_joins:
                            continue
                        stop = ipdom.get(lb)
                        origin = []
                        for p in set(jb.preds):
                            srcs = {s for s in blk.succs
                                    if (p == lb and s == j) or (p != stop and p in reach(s, stop))}
                            origin.append(srcs)
                        found = False
                        for i1 in range(len(origin)):
                            for i2 in range(len(origin)):
                                if i1 != i2 and any(a != b for a in origin[i1] for b in origin[i2]):
                                    found = True
                        if found:
                            div_joins.add(j)
                            changed = True
    analysis.varying = varying
    analysis.uniform = [v for v in analysis.slot_values
                    if v not in varying and not analysis.types[v].startswith("{")
                    and not re.match(r"<3 x", analysis.types[v])]


_EXIT = "mk.exit"  # a node after every block that leaves the function


def _immediate_post_dominators(fn) -> dict[str, str]:
    """Each block's immediate post-dominator (where the paths from its
    successors meet again), for the blocks that have one in the function:
    dominators of the reversed graph from a node every exit leads to."""
    reverse: dict[str, list[str]] = {lb: [] for lb in fn.order}
    reverse[_EXIT] = [lb for lb in fn.order if not fn.blocks[lb].succs]
    for lb in fn.order:
        for t in fn.blocks[lb].succs:
            reverse[t].append(lb)
    ipdom = immediate_dominators(_EXIT, reverse)
    return {lb: d for lb, d in ipdom.items() if lb != _EXIT and d != _EXIT}


def affine_counters(analysis: Analysis):
    """The counters of the loops with a resume point (loop_points.py): each
    is the thread's x or lin plus a number every thread in the loop shares
    at the point, so it is staged as that difference (the driver checks it,
    mk/workitem/stage.h stage_uniforms) and the region code adds the thread id
    back: its loads stay consecutive across threads. Only at the point
    itself: elsewhere the threads may have left the loop at different
    iterations."""
    fn = analysis.fn
    for sp in fn.syncs:
        if sp.kind != "point" or sp.block not in fn.point_ivs:
            continue
        v, base = fn.point_ivs[sp.block]
        if v in sp.live and v in analysis.slot_values and analysis.types.get(v) == "i32" \
                and v not in analysis.uniform:
            analysis.uniform.append(v)
            analysis.affine[v] = base


_ADD = re.compile(r"^(?:add(?: nuw)?(?: nsw)?|or disjoint) i32 (\S+), (\S+)$")


def affine_values(analysis: Analysis):
    """Saved values defined as the thread's x, lin or y plus a value no thread
    differs in (`i = tg * n + lid` with n from a buffer, live across a
    barrier): staged as that difference at every cut, like the loop
    counters at their points, so the region code adds the thread id back
    and addresses built from them stay consecutive across threads (else each
    is a per-thread load, and every access through it a gather). The driver
    checks the difference per run (mk/workitem/stage.h affine_run); where threads
    disagree it runs them one at a time."""
    fn = analysis.fn
    bases = {fn.x: "x", fn.lin: "lin", fn.y: "y"}
    for v in analysis.slot_values:
        ty = analysis.types.get(v)
        if v in analysis.uniform or v in analysis.affine or ty not in ("i32", "i64") or v in analysis.point_only:
            continue
        d = fn.defs[v]
        if ty == "i64":  # zext / sext of such an i32 (the address arithmetic's form)
            w = re.match(r"^[zs]ext(?: nneg)? i32 (%\S+) to i64$", d.rest)
            d = fn.defs.get(_name(w.group(1))) if w else None
            if d is None:
                continue
        m = _ADD.match(d.rest)
        if not m:
            continue
        a, b = (_name(t) if t.startswith("%") else None for t in m.groups())
        for base, other, token in ((a, b, m.group(2)), (b, a, m.group(1))):
            kind = bases.get(same_value(fn, base)) if base else None
            if kind and (other is None and re.fullmatch(r"-?\d+", token) or
                         other is not None and other not in analysis.varying):
                analysis.uniform.append(v)
                analysis.affine[v] = kind
                analysis.affine_any.add(v)
                break
