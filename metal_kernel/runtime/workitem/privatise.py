"""Privatisation: allocas whose contents or addresses live across a cut
move to a per-thread frame; the others stay on the stack of the step
function."""

from __future__ import annotations

import re

from ..ir import Call, _matching, _name, _ref, _split_top, parse_call, parse_type
from .analysis import Analysis
from .ir_model import Inst


class Privatisation:
    """Fills `a.private` and `a.derived` for the function `a` analyses."""

    def __init__(self, a: Analysis):
        self.a = a
        self.fn = a.fn

    def privatise(self):
        """Allocas whose contents or addresses live across a cut get a
        per-thread frame slot instead of a stack slot."""
        derived: dict[str, set[str]] = {}
        users: dict[str, list[Inst]] = {}
        for lb in self.fn.order:
            for ins in self.fn.blocks[lb].insts:
                for u in ins.uses:
                    users.setdefault(u, []).append(ins)
        self.a.private: list[str] = []
        slot_set = set(self.a.slot_values)
        for a in self.a.allocas:
            ds = {a}
            work = [a]
            escape = False
            while work:
                v = work.pop()
                for ins in users.get(v, []):
                    if ins.op in ("getelementptr", "bitcast", "addrspacecast", "select", "phi") and ins.name:
                        if ins.name not in ds:
                            ds.add(ins.name)
                            work.append(ins.name)
                    elif ins.op == "store":
                        parts = _split_top(re.sub(r"^store\s+(atomic\s+)?(volatile\s+)?", "", ins.rest))
                        _, j = parse_type(parts[0], 0)
                        if re.search(rf"{re.escape(_ref(v))}(?![-a-zA-Z$._0-9])", parts[0][j:]):
                            escape = True
                    elif ins.op in ("ptrtoint", "atomicrmw", "cmpxchg", "ret"):
                        escape = True
                    elif ins.op == "call":
                        c = ins.call or parse_call(ins.rest)
                        callee = _name(c.callee) if c.callee.startswith("@") else ""
                        if callee.startswith("llvm.") and not callee.startswith("llvm.ptrmask"):
                            continue
                        for _, val in c.args:
                            if val == _ref(v) and not self._nocapture(ins, c, val):
                                escape = True
                        if ins.name and c.ret == "ptr" and ins.name not in ds:
                            ds.add(ins.name)
                            work.append(ins.name)
            derived[a] = ds
            if escape or (ds & slot_set) or self._memory_crosses(ds):
                self.a.private.append(a)
        self.a.derived = derived

    def _nocapture(self, ins: Inst, c: Call, val: str) -> bool:
        """captures(none) / nocapture on every argument slot passing `val`."""
        m = re.search(re.escape(c.callee) + r"\(", ins.text)
        if not m:
            return False
        s = ins.text[m.end() - 1:]
        args = _split_top(s[1:_matching(s, 0)])
        found = False
        for a in args:
            if re.search(re.escape(val) + r"$", a.strip()):
                found = True
                if "captures(none)" not in a and "nocapture" not in a:
                    return False
        return found

    def _is_lifetime(self, ins: Inst, ds: set[str]) -> bool:
        return ins.op == "call" and "@llvm.lifetime." in ins.text and any(u in ds for u in ins.uses)

    def _memory_crosses(self, ds: set[str]) -> bool:
        """Could memory reached through `ds` be written before a cut and read
        after it? (Paths are cut by lifetime markers of the alloca.)"""
        def uses_ds(ins):
            return any(u in ds for u in ins.uses)

        for sp in self.fn.syncs:
            if self._reach(sp.cont, 0, +1, ds, uses_ds) and self._reach(sp.block, None, -1, ds, uses_ds):
                return True
        return False

    def _reach(self, start: str, idx, direction: int, ds, pred) -> bool:
        seen = set()
        work = [(start, idx)]
        while work:
            lb, i = work.pop()
            blk = self.fn.blocks[lb]
            insts = blk.insts
            rng = range(i if i is not None else 0, len(insts)) if direction > 0 else \
                range((i if i is not None else len(insts)) - 1, -1, -1)
            stopped = False
            for j in rng:
                ins = insts[j]
                if self._is_lifetime(ins, ds):
                    stopped = True
                    break
                if pred(ins):
                    return True
            if stopped:
                continue
            nxt = blk.succs if direction > 0 else blk.preds
            for s in nxt:
                if s not in seen:
                    seen.add(s)
                    work.append((s, None))
        return False
