"""Counted loops of a per-thread function: which values are induction
variables, and the start, step and bound that limit them.

`for (uint k = s; k < n; k += c) a[row * n + k]` compiles (-O2, loops not
unrolled: check/build.py FIRST_STAGE_FLAGS) to a header phi

    %k = phi i64 [ S, %preheader ], [ %k.next, %latch ]
    %k.next = add nuw nsw i64 %k, C
    ...
    %done = icmp eq i64 %k.next, %n        (or ult / slt / ne / uge ...)
    br i1 %done, label %exit, label %header

The phi's value is then in [S, n - 1] (check/affine.py names it `iv:<i>`);
at a dispatch the start and bound are evaluated with the real geometry and
scalars (affine.Evaluator.iv_interval), under conditions that rule out
wrapping. Only intervals come from here: an induction variable says nothing
about which thread owns which bytes.
"""

from __future__ import annotations

import re

from .cfg import Blocks

_LOCAL = r"%[-\w.$]+"
_BR = re.compile(rf"^\s*br i1 ({_LOCAL}), label ({_LOCAL}), label ({_LOCAL})")
_ADD = re.compile(rf"^add (?:(?:nuw|nsw) )*(i\d+) ({_LOCAL}|-?\d+), ({_LOCAL}|-?\d+)$")
_ICMP = re.compile(rf"^icmp (?:samesign )?(\w+) (i\d+) ({_LOCAL}|-?\d+), ({_LOCAL}|-?\d+)$")
_INCOMING = re.compile(rf"\[\s*([^,\]]+?),\s*({_LOCAL})\s*\]")

# A continue condition `next PRED bound` as (kind, bound adjustment):
# "lt" loops stop at the first value not below the bound; "ne" loops (step
# 1) at the bound itself.
_CONTINUE = {"ult": ("lt", 0), "slt": ("lt", 0), "ule": ("lt", 1), "sle": ("lt", 1), "ne": ("ne", 0)}
_INVERSE = {"eq": "ne", "ne": "eq", "ult": "uge", "uge": "ult", "ugt": "ule", "ule": "ugt",
            "slt": "sge", "sge": "slt", "sgt": "sle", "sle": "sgt"}
_SWAPPED = {"eq": "eq", "ne": "ne", "ult": "ugt", "ugt": "ult", "ule": "uge", "uge": "ule",
            "slt": "sgt", "sgt": "slt", "sle": "sge", "sge": "sle"}


def _clean(d: str) -> str:
    return re.sub(r",\s*!\w+ !\d+", "", d).strip()


def counted_loop(v: str, d: str, defs: dict[str, str], blocks: Blocks) -> dict | None:
    """When phi `v` (definition `d`) is the induction variable of a counted
    loop: {"start": value, "bound": value, "step": int, "kind": "lt" | "ne",
    "bits": int, "bound_adjust": int}, else None."""
    m = re.match(r"^phi (i\d+) (.*)$", _clean(d))
    if not m:
        return None
    ty = m.group(1)
    incoming = _INCOMING.findall(m.group(2))
    if len(incoming) != 2:
        return None
    header = blocks.block_of.get(v)
    for (nxt, latch), (start, _) in ((incoming[0], incoming[1]), (incoming[1], incoming[0])):
        step = _step(nxt, v, ty, defs)
        if step is None:
            continue
        cont = _continue_condition(nxt, header, latch, defs, blocks)
        if cont is None:
            continue
        pred, bound = cont
        if pred not in _CONTINUE:
            return None
        kind, adjust = _CONTINUE[pred]
        if kind == "ne" and step != 1:
            return None
        return {"start": start.strip(), "bound": bound, "step": step, "kind": kind,
                "bits": int(ty[1:]), "bound_adjust": adjust, "signed": pred.startswith("s")}
    return None


def _step(nxt: str, phi: str, ty: str, defs: dict[str, str]) -> int | None:
    """C when `nxt` is phi + C with a positive constant C."""
    m = _ADD.match(_clean(defs.get(nxt.strip(), "")))
    if not m or m.group(1) != ty:
        return None
    a, b = m.group(2), m.group(3)
    if a == phi and re.fullmatch(r"-?\d+", b):
        c = int(b)
    elif b == phi and re.fullmatch(r"-?\d+", a):
        c = int(a)
    else:
        return None
    return c if c > 0 else None


def _continue_condition(nxt: str, header: str | None, latch: str, defs, blocks: Blocks):
    """(predicate, bound) with `nxt predicate bound` true exactly when the
    latch branches back to the header."""
    br = _BR.match(blocks.terminator.get(latch, ""))
    if not br or header is None:
        return None
    cond, on_true, on_false = br.groups()
    if (on_true == header) == (on_false == header):
        return None
    m = _ICMP.match(_clean(defs.get(cond, "")))
    if not m:
        return None
    pred, _, a, b = m.groups()
    if a == nxt:
        bound = b
    elif b == nxt:
        pred, bound = _SWAPPED[pred], a
    else:
        return None
    if on_false == header:
        pred = _INVERSE[pred]
    return pred, bound
