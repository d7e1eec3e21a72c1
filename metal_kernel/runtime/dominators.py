"""Immediate dominators of a control-flow graph (Cooper, Harvey and
Kennedy's iterative algorithm), shared by the checker's CFG (check/cfg.py)
and the work-item compiler (its loops and its divergence analysis, which
runs it on the reversed graph for post-dominators)."""

from __future__ import annotations


def immediate_dominators(entry: str, succs: dict[str, list[str]]) -> dict[str, str]:
    """Each block reachable from `entry` -> its immediate dominator (the
    entry -> itself). Successors not in `succs` are ignored."""
    rpo = _reverse_postorder(entry, succs)
    index = {b: i for i, b in enumerate(rpo)}
    preds: dict[str, list[str]] = {b: [] for b in rpo}
    for b in rpo:
        for s in succs.get(b, []):
            if s in preds and b not in preds[s]:
                preds[s].append(b)
    idom = {entry: entry}
    changed = True
    while changed:
        changed = False
        for b in rpo[1:]:
            done = [p for p in preds[b] if p in idom]
            if not done:
                continue
            new = done[0]
            for p in done[1:]:
                new = _intersect(p, new, idom, index)
            if idom.get(b) != new:
                idom[b] = new
                changed = True
    return idom


def dominates(idom: dict[str, str], a: str, b: str) -> bool:
    """Whether a dominates b (False where b is unreachable)."""
    if b not in idom:
        return False
    while True:
        if a == b:
            return True
        if idom[b] == b:
            return False
        b = idom[b]


def _reverse_postorder(entry: str, succs: dict[str, list[str]]) -> list[str]:
    seen, post = {entry}, []
    stack = [(entry, iter(succs.get(entry, [])))]
    while stack:
        b, it = stack[-1]
        nxt = next((s for s in it if s not in seen and s in succs), None)
        if nxt is None:
            post.append(b)
            stack.pop()
        else:
            seen.add(nxt)
            stack.append((nxt, iter(succs.get(nxt, []))))
    return post[::-1]


def _intersect(a: str, b: str, idom: dict, index: dict) -> str:
    while a != b:
        while index[a] > index[b]:
            a = idom[a]
        while index[b] > index[a]:
            b = idom[b]
    return a
