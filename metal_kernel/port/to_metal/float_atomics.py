"""Whether a ported kernel adds floats atomically (itself or through a helper
it calls), for verify's comparison policy: the order of float atomic adds
is free on a GPU (and on the CPU's schedules), so their sums, and whatever
the kernel copies from them, may differ in the last bits between two runs
of the same kernel. verify then compares with a tolerance derived from the
reduction and reports a schedule-dependence as a note, not a finding.

Read from the generated Metal (what the port actually does): a float-typed
`atomic<T>` or one of the compare-and-swap loops the port writes for float,
half and bfloat adds (to_metal/helpers.py).
"""

from __future__ import annotations

import re

FLOAT_ATOMIC = re.compile(r"\batomic<\s*(?:float|half|bfloat)\s*>|\batomic_float\b|\bmk_atomic_add_cas(?:16|32)\b")
_IDENT = re.compile(r"\b[A-Za-z_]\w*\b")
_COMMENT = re.compile(r"\[\[.*?\]\]|//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\])*\"", re.DOTALL)
_HEAD = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^;{}()]*>)?\s*\([^;{}]*\)[^;{}()]*$", re.DOTALL)


def functions(metal: str) -> dict[str, list[str]]:
    """name -> the bodies of the top-level functions of that name (the
    signature before each top-level `{`; struct bodies are skipped)."""
    metal = _COMMENT.sub(lambda m: " " * len(m.group(0)), metal)  # their braces and `;` are not code
    out: dict[str, list[str]] = {}
    depth, start, head_from = 0, 0, 0
    for i, ch in enumerate(metal):
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                head = metal[head_from:start]
                m = _HEAD.search(head)
                if m:
                    out.setdefault(m.group(1), []).append(metal[start:i + 1])
                head_from = i + 1
        elif ch == ";" and depth == 0:
            head_from = i + 1
    return out


def uses_float_atomics(metal: str, kernel_name: str) -> bool:
    """The kernel named `kernel_name` in `metal`, or a function it calls
    (by name, transitively), adds floats atomically."""
    fns = functions(metal)
    todo, seen = [kernel_name], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in fns:
            continue
        seen.add(name)
        for body in fns[name]:
            if FLOAT_ATOMIC.search(body):
                return True
            todo += [w for w in set(_IDENT.findall(body)) if w in fns and w not in seen]
    return False
