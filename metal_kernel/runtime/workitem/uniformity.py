"""Uniformity: which saved values every thread of a group holds the same
(the driver checks that they agree, then serves them from one stage block,
which keeps them loop-invariant in the region loops)."""

from __future__ import annotations

import re

from ..ir import _name
from .analysis import Analysis
from .ir_model import phi_incoming


def uniform_candidates(analysis: Analysis):
    """A simple divergence analysis: `analysis.varying` (values that may
    differ between threads) and `analysis.uniform` (the slot values that
    cannot, read from the stage block the driver fills once per run)."""
    fn = analysis.fn
    varying = {fn.x, fn.y, fn.z, fn.lin}
    private = set()
    for a in analysis.allocas:
        private |= analysis.derived.get(a, {a})
    reach_cache: dict[str, set[str]] = {}

    def reach(s: str) -> set[str]:
        if s not in reach_cache:
            seen = {s}
            work = [s]
            while work:
                b = work.pop()
                for t in fn.blocks[b].succs:
                    if t not in seen:
                        seen.add(t)
                        work.append(t)
            reach_cache[s] = seen
        return reach_cache[s]

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
                        origin = []
                        for p in set(jb.preds):
                            srcs = {s for s in blk.succs if (p == lb and s == j) or p in reach(s)}
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
