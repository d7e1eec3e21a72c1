"""Analysis of a cut function: which values are live across each sync
point, and which of those are recomputed after the cut (computed only from
the arguments and the immutable WiGroup, so thread ids stay affine in the
loop counter) rather than saved per thread. privatise.py and uniformity.py
add their results to the same Analysis."""

from __future__ import annotations

import re

from ..ir import Unsupported, _name
from .abi import MAX_REMAT
from .ir_model import _PURE_INTRINSIC, _PURE_OPS, Function, phi_incoming
from .value_types import value_type


class Analysis:
    """What the emitters need to know about the values of `fn`."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.live_in: dict[str, set[str]] = {}  # per block (phi defs excluded)
        self.allocas: list[str] = []  # the entry block's
        self.avail: set[str] = set()  # the arguments and allocas: valid in every step function
        self.crossing: set[str] = set()  # live across some cut
        self.remat: dict[str, bool] = {}  # can_remat's memo
        self.types: dict[str, str] = {}  # of the crossing values
        self.slot_values: list[str] = []  # crossing, saved in per-thread slots
        self.remat_values: list[str] = []  # crossing, recomputed after the cut
        self.point_only: set[str] = set()  # slot values saved only at resume points, recomputed elsewhere
        self.private: list[str] = []  # allocas moved to the per-thread frame (privatise.py)
        self.derived: dict[str, set[str]] = {}  # alloca -> the pointers derived from it (privatise.py)
        self.varying: set[str] = set()  # values that may differ between threads (uniformity.py)
        self.uniform: list[str] = []  # slot values read from the stage block (uniformity.py)
        # Of those, loop counters staged as one difference from the thread's
        # "x" or "lin" at their resume point (uniformity.affine_counters), and
        # values defined as x or lin plus a uniform value, staged so at every
        # cut (uniformity.affine_values; also in affine_any).
        self.affine: dict[str, str] = {}
        self.affine_any: set[str] = set()
        # (sync id, value): staged values every thread of a call computes
        # alike, whose check the driver may skip there (run_invariance.py).
        self.run_invariant: set[tuple[int, str]] = set()

    def liveness(self):
        """live_in per block (phi defs excluded; phi uses on their edges)."""
        use, dfn, phi_uses = {}, {}, {}
        for lb in self.fn.order:
            blk = self.fn.blocks[lb]
            u, d = [], set()
            for ins in blk.insts:
                if ins.op == "phi":
                    d.add(ins.name)
                    continue
                for x in ins.uses:
                    if x not in d and x not in u:
                        u.append(x)
                if ins.name:
                    d.add(ins.name)
            use[lb], dfn[lb] = set(u), d
        for lb in self.fn.order:
            for ins in self.fn.blocks[lb].phis():
                for val, pred in phi_incoming(ins):
                    for _, nm in self.fn.locals.tokens(val):
                        if nm not in self.fn.locals.labels:
                            phi_uses.setdefault((pred, lb), set()).add(nm)
        live_in = {lb: set() for lb in self.fn.order}
        live_out = {lb: set() for lb in self.fn.order}
        work = list(reversed(self.fn.order))
        inq = set(work)
        while work:
            lb = work.pop()
            inq.discard(lb)
            blk = self.fn.blocks[lb]
            out = set()
            for s in blk.succs:
                out |= live_in[s]
                out |= phi_uses.get((lb, s), set())
            live_out[lb] = out
            new_in = use[lb] | (out - dfn[lb])
            if new_in != live_in[lb]:
                live_in[lb] = new_in
                for p in blk.preds:
                    if p not in inq:
                        work.append(p)
                        inq.add(p)
        self.live_in = live_in

    # ---------------------------------------------------- classification --
    def classify(self):
        entry = self.fn.blocks[self.fn.entry]
        self.allocas = [i.name for i in entry.insts if i.op == "alloca"]
        self.avail = set(self.fn.params) | set(self.allocas)
        crossing: set[str] = set()
        for sp in self.fn.syncs:
            live = sorted(x for x in self.live_in[sp.cont] if x not in self.avail and not x.startswith("mk."))
            for x in live:
                if x not in self.fn.defs:
                    raise Unsupported(f"value {x} live across a cut has no definition")
            sp.live = live
            crossing.update(live)
        self.crossing = crossing
        self.remat: dict[str, bool] = {}
        self.types: dict[str, str] = {}
        self.slot_values = []
        self.remat_values = []
        # A resume point in a loop (loop_points.py) restores its values once
        # per iteration: what would take a division or a square root there
        # every time is saved at the point instead (and, being the same in
        # every thread, usually staged once, uniformity.py); at the other
        # cuts it is still recomputed (point_only).
        at_points = {v for sp in self.fn.syncs if sp.kind == "point" for v in sp.live}
        for v in sorted(crossing):
            self.types[v] = value_type(self.fn.mod, self.fn.defs[v])
            if not self.can_remat(v):
                self.slot_values.append(v)
            elif v in at_points and self._costly_remat(v):
                self.slot_values.append(v)
                self.point_only.add(v)
            else:
                self.remat_values.append(v)

    def saved_at(self, sp, v: str) -> bool:
        """Whether live value v goes through its slot at cut sp (else it is
        recomputed)."""
        return v in self.slot_values and (v not in self.point_only or sp.kind == "point")

    def staged_at(self, sp, v: str) -> bool:
        """Whether live value v is read from the stage block after point sp:
        a uniform value anywhere, a loop counter (affine) only at its own
        resume point, x or lin plus a uniform value (affine_any) anywhere."""
        return v in self.uniform and self.saved_at(sp, v) and \
            (v not in self.affine or sp.kind == "point" or v in self.affine_any)

    def _costly_remat(self, v: str) -> bool:
        """Whether recomputing v takes a division, a remainder or a call
        (square roots and the like)."""
        seen: set[str] = set()
        work = [v]
        while work:
            x = work.pop()
            if x in seen or x in self.avail:
                continue
            seen.add(x)
            d = self.fn.defs.get(x)
            if d is None:
                continue
            if d.op in ("fdiv", "frem", "udiv", "sdiv", "urem", "srem", "call"):
                return True
            work += d.uses
        return False

    def invariant_address(self, p: str) -> bool:
        """p points into the WiGroup `g` (its geometry, buffer addresses,
        threadgroup allocations' addresses: immutable while the group runs)."""
        if p == self.fn.g or p.startswith("mk.tgp"):
            return True
        d = self.fn.defs.get(p)
        if d is None or d.op != "getelementptr" or len(d.uses) != 1:
            return False
        return self.invariant_address(d.uses[0])

    def can_remat(self, v: str) -> bool:
        count: set[str] = set()

        def ok(x: str) -> bool:
            if x in self.avail or x.startswith("mk.tgp"):
                return True
            if x in self.remat:
                if self.remat[x]:
                    count.add(x)
                return self.remat[x]
            d = self.fn.defs.get(x)
            res = False
            if d is not None and d.kind == "":
                if d.op in _PURE_OPS:
                    res = all(ok(u) for u in d.uses)
                elif d.op == "load" and not re.search(r"\b(volatile|atomic)\b", d.text):
                    res = len(d.uses) == 1 and self.invariant_address(d.uses[0])
                elif d.op == "call" and d.call is not None and d.call.callee.startswith("@") \
                        and _PURE_INTRINSIC.match(_name(d.call.callee)):
                    res = all(ok(u) for u in d.uses)
            self.remat[x] = res
            if res:
                count.add(x)
            return res

        r = ok(v)
        return r and len(count) <= MAX_REMAT
