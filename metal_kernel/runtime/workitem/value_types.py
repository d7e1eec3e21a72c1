"""The IR type of an instruction's result, read off its text: what a value
live across a cut is stored as."""

from __future__ import annotations

import re

from ..ir import _WORD, Module, Unsupported, _name, _split_top, parse_call, parse_type
from .ir_model import _BINOPS, _CASTS, _FLAGS, Inst


def value_type(mod: Module, ins: Inst) -> str:
    """The IR type of the value `ins` defines (Unsupported when unknown or not storable)."""
    rest = ins.rest
    op = ins.op
    try:
        if op == "call":
            t = (ins.call or parse_call(rest)).ret
        elif op in ("phi", "freeze"):
            t, _ = parse_type(skip_flags(rest[len(op):]), 0)
        elif op == "load":
            s = re.sub(r"^load\s+(atomic\s+)?(volatile\s+)?", "", rest)
            t, _ = parse_type(s, 0)
        elif op == "alloca":
            t = "ptr"
        elif op in _BINOPS or op == "fneg":
            t, _ = parse_type(skip_flags(rest[len(op):]), 0)
        elif op in ("icmp", "fcmp"):
            s = skip_flags(rest[len(op):])
            s = re.sub(r"^\w+\s+", "", s)  # predicate
            ot, _ = parse_type(s, 0)
            vm = re.match(r"<(vscale x )?(\d+) x ", ot)
            t = f"<{vm.group(1) or ''}{vm.group(2)} x i1>" if vm else "i1"
        elif op in _CASTS:
            idx = rest.rfind(" to ")
            t, _ = parse_type(rest, idx + 4)
        elif op == "select":
            parts = _split_top(skip_flags(rest[len(op):]))
            t, _ = parse_type(parts[1], 0)
        elif op == "getelementptr":
            parts = _split_top(skip_flags(rest[len(op):]))
            t = "ptr"
            for p in parts[1:]:
                vm = re.match(r"\s*<(vscale x )?(\d+) x (ptr|i\d+)>", p)
                if vm:
                    t = f"<{vm.group(1) or ''}{vm.group(2)} x ptr>"
                    break
        elif op == "extractelement":
            vt, _ = parse_type(rest[len(op):], 0)
            vm = re.match(r"<(vscale x )?\d+ x (.*)>$", vt)
            t = vm.group(2)
        elif op == "insertelement":
            t, _ = parse_type(rest[len(op):], 0)
        elif op == "shufflevector":
            vt, _ = parse_type(rest[len(op):], 0)
            parts = _split_top(rest[len(op):])
            mt, _ = parse_type(parts[2], 0)
            em = re.match(r"<(vscale x )?\d+ x (.*)>$", vt)
            mm = re.match(r"<(vscale x )?(\d+) x ", mt)
            t = f"<{mm.group(1) or ''}{mm.group(2)} x {em.group(2)}>"
        elif op == "insertvalue":
            t, _ = parse_type(rest[len(op):], 0)
        elif op == "extractvalue":
            at, j = parse_type(rest[len(op):], 0)
            idx = [int(x) for x in re.findall(r",\s*(\d+)", rest[len(op) + j:])]
            t = aggregate_member(mod, at, idx)
        elif op == "atomicrmw":
            parts = _split_top(re.sub(r"^atomicrmw\s+(volatile\s+)?\w+\s+", "", rest))
            t, _ = parse_type(parts[1], 0)
        elif op == "cmpxchg":
            parts = _split_top(re.sub(r"^cmpxchg\s+(weak\s+)?(volatile\s+)?", "", rest))
            vt, _ = parse_type(parts[1], 0)
            t = f"{{ {vt}, i1 }}"
        else:
            raise Unsupported(f"type of '{op}'")
    except Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - any parse surprise: stay on fibers
        raise Unsupported(f"cannot infer the type of {ins.text.strip()[:80]!r} ({e})")
    if t in ("void", "token", "label", "metadata"):
        raise Unsupported(f"value of type {t} live across a cut")
    return t


def skip_flags(s: str) -> str:
    """`s` without the flags (nuw, fast, ...) that may precede a type."""
    s = s.lstrip()
    while True:
        m = _WORD.match(s)
        if m and m.group(0) in _FLAGS:
            s = s[m.end():].lstrip()
            continue
        return s


def aggregate_member(mod: Module, t: str, idx: list[int]) -> str:
    """The type of member `idx` (extractvalue's indices) of aggregate type `t`."""
    for k in idx:
        t = t.strip()
        if t.startswith("%"):
            body = mod.types.get(_name(t))
            if body is None or body == "opaque":
                raise Unsupported("opaque struct")
            t = body.strip()
        if t.startswith("<{"):
            t = t[1:-1]
        if t.startswith("{"):
            t = _split_top(t[1:-1])[k]
        elif t.startswith("["):
            m = re.match(r"\[\d+ x (.*)\]$", t)
            t = m.group(1)
        else:
            raise Unsupported("extractvalue of a non-aggregate")
    return t.strip()
