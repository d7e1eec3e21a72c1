"""Staged values that every thread of a run computes alike, by construction.

Before running a region for a run of threads, the group driver checks that
every thread saved the same bits for each value the region reads from the
stage block (mk/workitem/stage.h, stage_uniforms): the divergence analysis calls
a value uniform when it does not depend on the thread ids, but a load may
still see another thread's store, or threads may reach a barrier along
different paths. The check reads every thread's slot: in a tiled matmul,
the loop counter at both barriers, on every iteration.

Some values need no check. At the exit to cut c of the step function
entered at point k, value v is *run-invariant* when each thread of one call
of that step saves the same bits for it: v is an integer or pointer
computed, on every path to the exit (its definition dominates the exit
block), by pure integer operations from constants, the group `g` and what
`g` holds, and values the step read from the stage block at k (the same for
the whole call); or v is not redefined in the step and was read from the
stage at k. A phi counts only where the step keeps a single incoming edge
of it (a loop's header entered from its latch). Floating point is left
out: the vectorised body and the scalar remainder of a loop may contract
or reassociate differently.

The descriptor flags such a value at c (Uniform::affine |
UNIFORM_RUN_INVARIANT) when it is run-invariant at every step's exit to c;
the driver then copies the first thread's bits instead of comparing, for a
run of threads that all left one call of a region at c and nothing ran in
between (mk/workitem/runs.h, run_span)."""

from __future__ import annotations

import re

from ..dominators import dominates, immediate_dominators
from .analysis import Analysis
from .cut import region_blocks
from .ir_model import _PURE_INTRINSIC, _PURE_OPS, phi_incoming, reachable

_FLOAT_OPS = {"fadd", "fsub", "fmul", "fdiv", "frem", "fneg", "fcmp", "fptrunc", "fpext", "fptoui", "fptosi",
              "uitofp", "sitofp"}
_EXACT_TYPE = re.compile(r"^(i\d+|ptr)$")


class _Step:
    """One step function's region: its blocks, their dominators within it,
    and the values it reads from the stage block on entry."""

    def __init__(self, a: Analysis, k: int):
        fn = a.fn
        start = fn.entry if k == 0 else fn.syncs[k - 1].cont
        self.blocks = region_blocks(fn, start)
        self.succs = {lb: [] if fn.blocks[lb].sync else [s for s in fn.blocks[lb].succs if s in self.blocks]
                      for lb in self.blocks}
        self.idom = immediate_dominators(start, self.succs)
        self.staged = set() if k == 0 else {v for v in fn.syncs[k - 1].live
                                            if a.staged_at(fn.syncs[k - 1], v) and v not in a.affine}
        self._reach: dict[str, set[str]] = {}

    def reaches(self, a: str, b: str) -> bool:
        """A path of at least one edge from block a to block b."""
        if a not in self._reach:
            self._reach[a] = reachable(self.succs[a], self.succs.__getitem__)
        return b in self._reach[a]


def run_invariant(a: Analysis) -> None:
    """Fills a.run_invariant: (sync id, value) for the staged values whose
    check the driver may skip at that point."""
    fn = a.fn
    steps = [_Step(a, k) for k in range(len(fn.syncs) + 1)]
    a.run_invariant = set()
    for sp in fn.syncs:
        exits = [(st, lb) for st in steps for lb in st.blocks if fn.blocks[lb].sync == sp.id]
        for v in sp.live:
            if a.staged_at(sp, v) and v not in a.affine and _EXACT_TYPE.match(a.types[v]) and exits and \
                    all(_alike(a, st, v, lb, frozenset()) for st, lb in exits):
                a.run_invariant.add((sp.id, v))


def _alike(a: Analysis, st: _Step, v: str, at: str | None, seen: frozenset) -> bool:
    """Whether v, as the step sees it in block `at` (None: on entry), is the
    same in every thread of one call of the step."""
    fn = a.fn
    if v == fn.g or v.startswith("mk.tgp"):
        return True  # the group, and addresses in it
    if v in fn.params or v in a.avail:
        return False  # a thread id, a per-thread alloca
    d = fn.defs.get(v)
    if d is None:
        return False
    if at is not None and d.block in st.blocks:
        if not dominates(st.idom, d.block, at):
            # Not computed on every path here: the entry value only where
            # the step cannot have computed it yet.
            return not st.reaches(d.block, at) and _alike(a, st, v, None, seen)
    elif v in st.staged:
        return True
    elif v not in a.remat_values:
        return False  # restored from this thread's slot
    # Computed by the step (or, remat, recomputed on entry), here.
    if v in seen:
        return False  # a cycle: a loop inside the step
    seen = seen | {v}
    where = None if at is None or d.block not in st.blocks else d.block
    if d.op == "phi":
        if where is None:
            return False
        kept = [(val, pred) for val, pred in phi_incoming(d) if pred in st.blocks and not fn.blocks[pred].sync]
        return len(kept) == 1 and all(_alike(a, st, u, kept[0][1], seen)
                                      for _, u in fn.locals.tokens(kept[0][0]) if u not in fn.locals.labels)
    if d.op in _FLOAT_OPS or d.kind != "":
        return False
    if d.op == "load":
        return not re.search(r"\b(volatile|atomic)\b", d.text) and len(d.uses) == 1 and \
            a.invariant_address(d.uses[0])
    if d.op in _PURE_OPS or (d.op == "call" and d.call is not None and _PURE_INTRINSIC.match(d.call.callee[1:])):
        return all(_alike(a, st, u, where, seen) for u in d.uses)
    return False
