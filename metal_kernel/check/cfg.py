"""The control-flow graph of one per-thread function: which block holds each
value and line, each block's terminator, successors and predecessors, and
dominators (Cooper, Harvey and Kennedy's iterative algorithm).

check/loops.py reads counted loops from it, check/guards.py the conditions
that hold where an access runs."""

from __future__ import annotations

import re

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
        if self._idom is not None:
            return self._idom
        rpo = self._reverse_postorder()
        index = {b: i for i, b in enumerate(rpo)}
        idom = {ENTRY: ENTRY}
        changed = True
        while changed:
            changed = False
            for b in rpo[1:]:
                done = [p for p in self.preds.get(b, []) if p in idom]
                if not done:
                    continue
                new = done[0]
                for p in done[1:]:
                    new = _intersect(p, new, idom, index)
                if idom.get(b) != new:
                    idom[b] = new
                    changed = True
        self._idom = idom
        return idom

    def dominates(self, a: str, b: str) -> bool:
        idom = self.idom()
        if b not in idom:
            return False  # unreachable
        while True:
            if a == b:
                return True
            if b == ENTRY:
                return False
            b = idom[b]

    def dominators(self, b: str) -> list[str]:
        """b's strict dominators, nearest first."""
        idom = self.idom()
        out = []
        while b in idom and b != ENTRY:
            b = idom[b]
            out.append(b)
        return out

    def _reverse_postorder(self) -> list[str]:
        seen, post = {ENTRY}, []
        stack = [(ENTRY, iter(self.succs.get(ENTRY, [])))]
        while stack:
            b, it = stack[-1]
            nxt = next((s for s in it if s not in seen and s in self.succs), None)
            if nxt is None:
                post.append(b)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(self.succs.get(nxt, []))))
        return post[::-1]


def _intersect(a: str, b: str, idom: dict, index: dict) -> str:
    while a != b:
        while index[a] > index[b]:
            a = idom[a]
        while index[b] > index[a]:
            b = idom[b]
    return a
