"""Resume points in per-thread strided loops, so that they run across threads.

A region's code runs thread after thread (emit_loop.py), and a loop inside
it runs whole for one thread before the next starts: the idiom of MLX's and
PyTorch's reductions,

    for (uint i = lid; i < n; i += lsize) acc += x[i];

runs scalar, one thread's few iterations at a time. Ending the loop's
iterations at a resume point (a cut that synchronises nothing: a thread
there may go on at once, mk/workitem/descriptor.h SYNC_POINT) turns every iteration
into one pass of the region loop over all the threads still in the loop,
which vectorises across threads: thread t's `i` is `t + j * lsize` in pass
j, consecutive threads read consecutive elements.

That needs `i` restored as the thread index plus one number per pass, not
loaded per thread (which would be a gather): the loop's counter is marked
*affine* (Function.point_ivs). The driver checks at run time that every
thread resuming there has counter - x (or - lin) equal and serves that one
difference from the stage block; where they differ it runs one thread at a
time (mk/workitem/stage.h stage_uniforms), so the mark only decides speed, never
results.

Only loops whose counter starts at the thread's x or lin (plus a value no
thread differs in) and steps by such a value get a point, and only loops
that synchronise nothing and sit in no other loop that synchronises
nothing (whose threads could then be at different iterations). Points are
left out of checked builds (check/build.py), whose driver reports barriers."""

from __future__ import annotations

import re

from ..dominators import dominates, immediate_dominators
from ..ir import _name, _ref
from .abi import POINT_FLAGS, SYNC_MARKERS
from .ir_model import _PURE_OPS, Block, Function, Inst, branch_targets, phi_incoming, same_value


def _succs(blk: Block) -> list[str]:
    if not blk.insts:
        return []
    t = blk.insts[-1]
    return branch_targets(t) if t.op in ("br", "switch") else []


def _loops(fn: Function, succs: dict[str, list[str]]) -> list[tuple[str, str, set[str]]]:
    """(header, latch, body) of every natural loop with a single back edge."""
    idom = immediate_dominators(fn.entry, succs)
    preds: dict[str, list[str]] = {lb: [] for lb in fn.order}
    for lb in fn.order:
        for s in succs[lb]:
            if s in preds:
                preds[s].append(lb)
    back: dict[str, list[str]] = {}
    for u in fn.order:
        for h in succs[u]:
            if dominates(idom, h, u):
                back.setdefault(h, []).append(u)
    out = []
    for h, latches in back.items():
        if len(latches) != 1:
            continue
        u = latches[0]
        body = {h, u}
        work = [u]
        while work:
            b = work.pop()
            if b == h:
                continue
            for p in preds[b]:
                if p not in body:
                    body.add(p)
                    work.append(p)
        out.append((h, u, body))
    return out


class _Threads:
    """Which values may differ between the threads (a cheap, conservative
    test for a point's counter: what reaches a thread id or a phi)."""

    def __init__(self, fn: Function):
        self.fn = fn
        self.ids = {fn.x, fn.y, fn.z, fn.lin}
        self.memo: dict[str, bool] = {}

    def same_in_all(self, v: str, depth: int = 0) -> bool:
        if v in self.ids:
            return False
        if v in self.fn.params or depth > 24:
            return v in self.fn.params
        if v in self.memo:
            return self.memo[v]
        d = self.fn.defs.get(v)
        ok = d is not None and (d.op in _PURE_OPS or d.op == "load") and \
            all(self.same_in_all(u, depth + 1) for u in d.uses)
        self.memo[v] = ok
        return ok


def _operands(ins: Inst) -> list[str]:
    """The two operands of a binary instruction, as written."""
    m = re.match(r"\s*add\s+(?:(?:nuw|nsw)\s+)*i32\s+(\S+),\s*(\S+)\s*$", ins.rest)
    return [m.group(1), m.group(2)] if m else []


def insert(fn: Function) -> int:
    """Adds a resume point on the back edge of every strided loop of `fn`
    (before the cut: cut.py turns each into a SyncPoint of kind "point")
    and records each one's counter in `fn.point_ivs`. Returns how many."""
    fn.defs = {ins.name: ins for lb in fn.order for ins in fn.blocks[lb].insts if ins.name}
    succs = {lb: _succs(fn.blocks[lb]) for lb in fn.order}
    loops = _loops(fn, succs)

    def synchronises(body: set[str]) -> bool:
        for lb in body:
            for ins in fn.blocks[lb].insts:
                if ins.op == "call" and any(f"@{m}(" in ins.text for m in SYNC_MARKERS):
                    return True
        return False

    quiet = [(h, u, body) for h, u, body in loops if not synchronises(body)]
    threads = _Threads(fn)
    added = 0
    for h, u, body in quiet:
        if any(body < other for _, _, other in quiet):
            continue  # inside another loop that synchronises nothing
        if fn.blocks[u].insts[-1].op != "br":
            continue  # a switch may branch to the header more than once
        found = _counter(fn, h, u, threads)
        if found is None:
            continue
        iv_next, base = found
        label = f"mk.lp{added}"
        fn.locals.labels.add(label)
        point = Block(label)
        point.insts = [Inst(f"  call void @{SYNC_MARKERS[0]}(i32 {POINT_FLAGS})", fn.locals),
                       Inst(f"  br label {_ref(h)}", fn.locals)]
        for ins in point.insts:
            ins.block = label
        latch = fn.blocks[u]
        term = latch.insts[-1]
        term.text = re.sub(rf"label\s+{re.escape(_ref(h))}(?=[\s,\]]|$)", f"label {_ref(label)}", term.text)
        for ins in fn.blocks[h].insts:
            if ins.op != "phi":
                break
            ins.text = re.sub(rf"(,\s*){re.escape(_ref(u))}(\s*\])", rf"\g<1>{_ref(label)}\g<2>", ins.text)
        fn.blocks[label] = point
        fn.order.insert(fn.order.index(u) + 1, label)
        fn.point_ivs[label] = (iv_next, base)
        fn.point_loops[label] = set(body)
        added += 1
    return added


def _counter(fn: Function, h: str, u: str, threads: _Threads) -> tuple[str, str] | None:
    """The loop's counter: a header phi `i = [start, outside], [i + step,
    latch]` with `start` the thread's x or lin (plus a value every thread
    has the same) and `step` the same in every thread. Returns (the name of
    i + step, "x" or "lin"), or None."""
    for ins in fn.blocks[h].insts:
        if ins.op != "phi":
            break
        if not re.match(r"\s*phi\s+i32\s", ins.rest):
            continue
        inc = phi_incoming(ins)
        if len(inc) != 2:
            continue
        latch_vals = [v for v, p in inc if p == u]
        start_vals = [v for v, p in inc if p != u]
        if len(latch_vals) != 1 or len(start_vals) != 1 or not latch_vals[0].startswith("%"):
            continue
        nxt = fn.defs.get(_name(latch_vals[0]))
        if nxt is None or nxt.op != "add":
            continue
        ops = _operands(nxt)
        if _ref(ins.name) not in ops:
            continue
        step = ops[1] if ops[0] == _ref(ins.name) else ops[0]
        if step.startswith("%") and not threads.same_in_all(_name(step)):
            continue
        base = _base(fn, start_vals[0], threads)
        if base is not None:
            return nxt.name, base
    return None


def _base(fn: Function, start: str, threads: _Threads) -> str | None:
    """"x" or "lin" when `start` is that thread id, or it plus a value every
    thread has the same."""
    if not start.startswith("%"):
        return None
    s = same_value(fn, _name(start))
    ids = {fn.x: "x", fn.lin: "lin"}
    if s in ids:
        return ids[s]
    d = fn.defs.get(s)
    if d is None or d.op != "add":
        return None
    ops = _operands(d)
    for a, b in (ops, ops[::-1]) if ops else ():
        if a.startswith("%") and same_value(fn, _name(a)) in ids and \
                (not b.startswith("%") or threads.same_in_all(_name(b))):
            return ids[same_value(fn, _name(a))]
    return None
