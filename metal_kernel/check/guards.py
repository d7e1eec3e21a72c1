"""Comparisons that hold wherever an access runs: the branch conditions on
every path to it.

`if (i < n) out[i] = v;` and `if (gid >= n) return; out[gid] = v;` both
reach the store only along the edge where `i <u n` is true; that edge
dominates the store's block (check/cfg.py), so the comparison bounds the
store's offset for every thread that makes it (affine.Evaluator.bounds).
Conjunctions (`a < n && b < m`, as `and` or a `select` that short-cuts) give
one comparison each; a disjunction on its false edge too.
"""

from __future__ import annotations

import re

from .cfg import Blocks

_LOCAL = r"%[-\w.$]+"
_OPERAND = rf"(?:{_LOCAL}|-?\d+|true|false)"
_BR = re.compile(rf"^\s*br i1 ({_LOCAL}), label ({_LOCAL}), label ({_LOCAL})")
_ICMP = re.compile(rf"^icmp (?:samesign )?(\w+) (i\d+) ({_OPERAND}), ({_OPERAND})$")
_LOGIC = re.compile(rf"^(and|or|xor) i1 ({_OPERAND}), ({_OPERAND})$")
_SELECT = re.compile(rf"^select i1 ({_OPERAND}), i1 ({_OPERAND}), i1 ({_OPERAND})$")

_INVERSE = {"eq": "ne", "ne": "eq", "ult": "uge", "uge": "ult", "ugt": "ule", "ule": "ugt",
            "slt": "sge", "sge": "slt", "sgt": "sle", "sle": "sgt"}
# `a > b` is `b < a`: every comparison as lhs < rhs or lhs <= rhs
_AS_LESS = {"ult": ("ult", False), "ule": ("ule", False), "slt": ("slt", False), "sle": ("sle", False),
            "ugt": ("ult", True), "uge": ("ule", True), "sgt": ("slt", True), "sge": ("sle", True)}


def _clean(d: str) -> str:
    return re.sub(r",\s*!\w+ !\d+", "", d).strip()


class Guards:
    """The comparisons true in each block of one function, as
    (lhs, predicate, rhs, bits) with predicate ult / ule / slt / sle."""

    def __init__(self, blocks: Blocks, defs: dict[str, str]):
        self.blocks = blocks
        self.defs = defs
        self.memo: dict[str, list] = {}

    def at(self, block: str) -> list[tuple[str, str, str, int]]:
        if block in self.memo:
            return self.memo[block]
        out = []
        for d in self.blocks.dominators(block):
            br = _BR.match(self.blocks.terminator.get(d, ""))
            if not br:
                continue
            cond, on_true, on_false = br.groups()
            if on_true == on_false:
                continue
            for succ, truth in ((on_true, True), (on_false, False)):
                # The edge d -> succ dominates the block when succ does and
                # can be entered from d only.
                if self.blocks.preds.get(succ) == [d] and self.blocks.dominates(succ, block):
                    self._facts(cond, truth, out, 0)
        self.memo[block] = out
        return out

    def _facts(self, v: str, truth: bool, out: list, depth: int) -> None:
        if depth > 8 or not v.startswith("%"):
            return
        d = _clean(self.defs.get(v, ""))
        m = _ICMP.match(d)
        if m:
            pred, ty, a, b = m.groups()
            pred = pred if truth else _INVERSE.get(pred, "")
            if pred == "eq":  # a == b: a <= b and b <= a
                out += [(a, "ule", b, int(ty[1:])), (b, "ule", a, int(ty[1:]))]
            elif pred in _AS_LESS:
                less, swap = _AS_LESS[pred]
                lhs, rhs = (b, a) if swap else (a, b)
                out.append((lhs, less, rhs, int(ty[1:])))
            return
        m = _LOGIC.match(d)
        if m:
            op, a, b = m.groups()
            if op == "xor" and b == "true":
                self._facts(a, not truth, out, depth + 1)
            elif (op == "and" and truth) or (op == "or" and not truth):
                self._facts(a, truth, out, depth + 1)
                self._facts(b, truth, out, depth + 1)
            return
        m = _SELECT.match(d)
        if m:  # short-circuit && (c ? x : false) and || (c ? true : x)
            c, x, y = m.groups()
            if (y == "false" and truth) or (x == "true" and not truth):
                self._facts(c, truth, out, depth + 1)
                self._facts(x if y == "false" else y, truth, out, depth + 1)
