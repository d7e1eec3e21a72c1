"""Regions that only the first threads of each row work in.

A tree reduction's levels are regions of the form

    if (lid < s) buf[lid] += buf[lid + s];   // then the next barrier

Its step function does nothing for a thread with x >= s but return the
next cut. Vectorised over a row of threads, the branch becomes masked loads
and stores; with AVX-512's mask registers they are cheap, but built for
AVX2 (vmaskmovps, masks from 64-bit compares and packs) the region ran
slower than scalar code, and the whole reduction 2.4x slower than the
AVX-512 build. Knowing the guard, the loop over a row calls the step only
for x < s and stores the other threads' state directly (emit_loop.py): the
called part has no branch left to mask.

The same holds for a guard on the thread's index in the group: c10's and
MLX's `if (sg == 0)` (sg = lin / 32) after a barrier leaves all but the
first simdgroup idle.

`prefix_guard` reads the step function's text: from its entry, blocks
without side effects (loads, address arithmetic, the step's own stack
slots `%mk.a.*`) lead to a conditional branch on the thread's x or lin
(or either shifted right by a constant) against a constant, one of whose
targets is a block holding only `ret i32 K`. It returns Guard(coord, C, K):
threads with coord >= C return K and do nothing else.
"""

from __future__ import annotations

import re
from typing import NamedTuple

_DEFINE = re.compile(r"^define internal i32 @__mk_wistep_\d+_\d+\((.*)\)[^)]*\{\s*$")
_LABEL = re.compile(r"^([-a-zA-Z$._0-9]+):")
_BR = re.compile(r"^\s*br label %([-a-zA-Z$._0-9]+)\s*$")
_CONDBR = re.compile(r"^\s*br i1 (%[-a-zA-Z$._0-9]+), label %([-a-zA-Z$._0-9]+), label %([-a-zA-Z$._0-9]+)\s*$")
_RET = re.compile(r"^\s*ret i32 (-?\d+)\s*$")
_ICMP = re.compile(r"^\s*(%[-a-zA-Z$._0-9]+) = icmp (\w+) i32 (%[-a-zA-Z$._0-9]+), (-?\d+)\s*$")
# Instructions that neither write memory nor call anything.
_PURE = re.compile(r"^\s*%[-a-zA-Z$._0-9]+ = (alloca|getelementptr|load|zext|sext|trunc|add|sub|mul|shl|lshr|ashr|and|"
                   r"or|xor|icmp|select|bitcast|ptrtoint|inttoptr|freeze|insertelement|extractelement|"
                   r"shufflevector)\b")
_OWN_STORE = re.compile(r"^\s*store (?:[^,]*\s)?(%[-a-zA-Z$._0-9]+|[^,\s]+), ptr (%mk\.a\.[-a-zA-Z$._0-9]+)\s*$")
# Copies of a value: the region reloads values live across the cut from the
# step's stack slots, and the cut writes x as `or i32 %x, 0`.
_SLOT_LOAD = re.compile(r"^\s*(%[-a-zA-Z$._0-9]+) = load i32, ptr (%mk\.a\.[-a-zA-Z$._0-9]+)\s*$")
_IDENTITY = re.compile(r"^\s*(%[-a-zA-Z$._0-9]+) = (?:or|add|xor) i32 (%[-a-zA-Z$._0-9]+), 0\s*$")
# x or lin shifted right: the simdgroup index lin / 32 is `lshr i32 %lin, 5`.
_SHIFT = re.compile(r"^\s*(%[-a-zA-Z$._0-9]+) = (lshr|udiv) i32 (%[-a-zA-Z$._0-9]+), (\d+)\s*$")
_LIMIT = 1 << 16  # group sizes are far below: x + 1 never wraps


class Guard(NamedTuple):
    coord: str  # "x" (the thread's x in the group) or "lin" (its index in the group)
    below: int  # only threads with coord < below do anything
    state: int  # what the others return


def _blocks(lines: list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur = None
    for line in lines[1:]:
        m = _LABEL.match(line)
        if m:
            cur = out.setdefault(m.group(1), [])
        elif cur is not None and line.strip() and line.strip() != "}":
            cur.append(line)
    return out


def _work_below(pred: str, c: int, noop_when_true: bool) -> int | None:
    """C such that the work is done exactly for x < C (x a thread position,
    0 <= x < 2^16), for `icmp pred x, c` whose no-op side is as given."""
    if not 0 <= c < _LIMIT:
        return None
    # the condition under which the thread works
    work = {"ult": ("lt", c), "slt": ("lt", c), "ule": ("lt", c + 1), "sle": ("lt", c + 1), "eq": ("eq", c),
            "ugt": ("ge", c + 1), "sgt": ("ge", c + 1), "uge": ("ge", c), "sge": ("ge", c), "ne": ("ne", c)}
    flip = {"lt": "ge", "ge": "lt", "eq": "ne", "ne": "eq"}
    if pred not in work:
        return None
    kind, bound = work[pred]
    if noop_when_true:
        kind = flip[kind]
    if kind == "lt":
        return bound
    if kind == "eq" and bound == 0:
        return 1
    return None


def prefix_guard(step: list[str]) -> Guard | None:
    """The guard of a step function whose only working threads are those
    with x (or lin) below a constant; None if it has none."""
    m = _DEFINE.match(step[0]) if step else None
    if not m:
        return None
    params = [p.split()[-1] for p in m.group(1).split(", ")]
    if len(params) != 8:
        return None
    blocks = _blocks(step)
    label = "mk.entry"
    seen = set()
    defs: dict[str, tuple[str, int, str, int]] = {}  # icmp -> (pred, const, coord, shift)
    copies = {params[4]: ("x", 0), params[7]: ("lin", 0)}  # values equal to coord >> shift
    slots: dict[str, tuple[str, int]] = {}  # stack slots holding such values
    while label in blocks and label not in seen:
        seen.add(label)
        body = blocks[label]
        for line in body[:-1]:
            if not (_PURE.match(line) or _OWN_STORE.match(line)) or " volatile " in line or " atomic " in line:
                return None
            icmp = _ICMP.match(line)
            if icmp and icmp.group(3) in copies:
                defs[icmp.group(1)] = (icmp.group(2), int(icmp.group(4)), *copies[icmp.group(3)])
            same = _IDENTITY.match(line)
            if same and same.group(2) in copies:
                copies[same.group(1)] = copies[same.group(2)]
            shift = _SHIFT.match(line)
            if shift and shift.group(3) in copies:
                coord, s0 = copies[shift.group(3)]
                k = int(shift.group(4))
                if shift.group(2) == "udiv":
                    k = k.bit_length() - 1 if k > 0 and not k & (k - 1) else -1
                if 0 <= k < 16:
                    copies[shift.group(1)] = (coord, s0 + k)
            own = _OWN_STORE.match(line)
            if own:
                if own.group(1) in copies:
                    slots[own.group(2)] = copies[own.group(1)]
                else:
                    slots.pop(own.group(2), None)
            load = _SLOT_LOAD.match(line)
            if load and load.group(2) in slots:
                copies[load.group(1)] = slots[load.group(2)]
        last = body[-1] if body else ""
        br = _BR.match(last)
        if br:
            label = br.group(1)
            continue
        cond = _CONDBR.match(last)
        if not cond or cond.group(1) not in defs:
            return None
        pred, c, coord, shift = defs[cond.group(1)]
        for target, noop_when_true in ((cond.group(3), False), (cond.group(2), True)):
            ret = blocks.get(target, [])
            if len(ret) == 1 and _RET.match(ret[0]):
                below = _work_below(pred, c, noop_when_true)
                if below is not None and below << shift < _LIMIT:
                    return Guard(coord, below << shift, int(_RET.match(ret[0]).group(1)))
        return None
    return None


def step_functions(lines: list[str], sym: int) -> dict[int, list[str]]:
    """The text of each step function __mk_wistep_<sym>_<k> in `lines`."""
    out: dict[int, list[str]] = {}
    head = re.compile(rf"^define internal i32 @__mk_wistep_{sym}_(\d+)\(")
    cur = None
    for line in lines:
        m = head.match(line)
        if m:
            cur = out.setdefault(int(m.group(1)), [])
        if cur is not None:
            cur.append(line)
            if line.strip() == "}":
                cur = None
    return out
