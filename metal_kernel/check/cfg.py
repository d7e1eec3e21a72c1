"""The control-flow graph of one per-thread function: which block holds each
value and line, each block's terminator, successors and predecessors, and
dominators (runtime/dominators.py).

check/loops.py reads counted loops from it, check/guards.py the conditions
that hold where an access runs."""

from __future__ import annotations

import re

from ..runtime.dominators import dominates, immediate_dominators

_LOCAL = r"%[-\w.$]+"
_LABEL = re.compile(r"^([-\w.$]+):")
_DEF = re.compile(rf"^\s*({_LOCAL}) = ")
_TARGET = re.compile(rf"label ({_LOCAL})")
_TERMINATORS = ("br ", "switch ", "ret ", "ret\n", "unreachable", "indirectbr ", "resume ", "callbr ")

ENTRY = ""  # the entry block has no label in numbered IR


class Blocks:
    def __init__(self, lines: list[str]):
        self.block_of: dict[str, str] = {}  # value -> block
        self.block_at: list[str] = []  # line index -> block
        self.terminator: dict[str, str] = {}
        self.order: list[str] = [ENTRY]
        current = ENTRY
        self.block_at.append(ENTRY)  # the header line
        in_switch = False
        for ln in lines[1:]:
            m = _LABEL.match(ln)
            if m:
                current = "%" + m.group(1)
                self.order.append(current)
            self.block_at.append(current)
            if m:
                continue
            d = _DEF.match(ln)
            if d:
                self.block_of[d.group(1)] = current
            s = ln.strip()
            if in_switch:  # a switch's cases span lines up to its "]"
                self.terminator[current] += " " + s
                in_switch = "]" not in s
            elif s.startswith(_TERMINATORS) or s in ("ret void", "unreachable"):
                self.terminator[current] = s
                in_switch = s.startswith("switch ") and "]" not in s
        self.succs = {b: _TARGET.findall(self.terminator.get(b, "")) for b in self.order}
        self.preds: dict[str, list[str]] = {b: [] for b in self.order}
        for b, ss in self.succs.items():
            for s in ss:
                if s in self.preds and b not in self.preds[s]:
                    self.preds[s].append(b)
        self._idom: dict[str, str] | None = None

    # -- dominators --
    def idom(self) -> dict[str, str]:
        if self._idom is None:
            self._idom = immediate_dominators(ENTRY, self.succs)
        return self._idom

    def dominates(self, a: str, b: str) -> bool:
        return dominates(self.idom(), a, b)

    def dominators(self, b: str) -> list[str]:
        """b's strict dominators, nearest first."""
        idom = self.idom()
        out = []
        while b in idom and b != ENTRY:
            b = idom[b]
            out.append(b)
        return out
