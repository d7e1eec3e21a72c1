"""A pre-pass on the module text: reads of one half of a pair of scalars
packed into an integer become the scalar (see fold_pair_bitcasts)."""

from __future__ import annotations

import re

from ..ir import _LOCAL

_INSERT = re.compile(rf"^\s*({_LOCAL}) = insertelement <2 x i(16|32)> (poison|undef|{_LOCAL}), "
                     rf"i(?:16|32) ({_LOCAL}|-?\d+), i(?:32|64) ([01])$")
_PAIR_CAST = re.compile(rf"^\s*({_LOCAL}) = bitcast <2 x i(16|32)> ({_LOCAL}) to i(32|64)$")


def fold_pair_bitcasts(text: str) -> str:
    """Rewrites reads of one half of a 2-vector made of two scalars and cast
    to one integer: `lshr (bitcast <x, y>), 32` -> `zext y`, `and ..., 2^32-1`
    and `trunc ...` -> x. A 2-component thread id whose components are read
    as fields (mk/types.h's union of the vector and its x/y members) reaches
    the IR in this form, which hides from the loop vectoriser that an address
    is affine in the thread's x (a region loop then runs scalar)."""
    lines = text.split("\n")
    halves: dict[str, tuple[str, str | None, str | None]] = {}  # name -> (bits, x, y)
    pairs: dict[str, tuple[str, str, str]] = {}  # bitcast name -> (bits, x, y)
    for i, line in enumerate(lines):
        if line.startswith("define "):
            halves.clear()
            pairs.clear()
            continue
        if m := _INSERT.match(line):
            name, bits, base, val, idx = m.groups()
            x, y = halves.get(base, (bits, None, None))[1:] if base.startswith("%") else (None, None)
            halves[name] = (bits, val, y) if idx == "0" else (bits, x, val)
            continue
        if m := _PAIR_CAST.match(line):
            name, bits, vec, _ = m.groups()
            h = halves.get(vec)
            if h and h[1] is not None and h[2] is not None:
                pairs[name] = (bits, h[1], h[2])
            continue
        for name, (bits, x, y) in pairs.items():
            if name not in line:
                continue
            n, wide = int(bits), 2 * int(bits)
            ind = line[:len(line) - len(line.lstrip())]
            if m := re.match(rf"^\s*({_LOCAL}) = lshr(?: exact)? i{wide} {re.escape(name)}, {n}$", line):
                lines[i] = f"{ind}{m.group(1)} = zext i{n} {y} to i{wide}"
            elif m := re.match(rf"^\s*({_LOCAL}) = and i{wide} {re.escape(name)}, {(1 << n) - 1}$", line):
                lines[i] = f"{ind}{m.group(1)} = zext i{n} {x} to i{wide}"
            elif m := re.match(rf"^\s*({_LOCAL}) = trunc(?: nuw| nsw)* i{wide} {re.escape(name)} to i{n}$", line):
                lines[i] = f"{ind}{m.group(1)} = or i{n} {x}, 0"
            break
    return "\n".join(lines)
