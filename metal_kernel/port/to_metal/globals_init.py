"""The bytes of the __constant__ / __device__ variables that became buffers
of the port: their size, and their initial value when the declaration's
initializer is made of numbers (anything else starts as zeros and is set
with lib.set_constant, as cudaMemcpyToSymbol would)."""

from __future__ import annotations

import re

import numpy as np

from .facts import Facts
from .model import SCALAR_DTYPES, canonical_type
from .source import CudaSource

_NUMBER = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[fFuUlL]*$")


def _count(dims: list[str]) -> int | None:
    n = 1
    for d in dims:
        text = d.strip("[]").strip()
        if not re.fullmatch(r"[\d\s*+()]+", text or "x"):
            return None
        try:
            n *= int(eval(text, {"__builtins__": {}}))  # digits and + * ( ) only
        except (SyntaxError, ValueError):
            return None
    return n


def _numbers(init: str) -> list[str] | None:
    body = init.strip()
    if body.startswith("{") and body.endswith("}"):
        body = body[1:-1]
    items = [x.strip() for x in body.split(",") if x.strip()]
    return items if all(_NUMBER.match(x) for x in items) else None


def global_bytes(g) -> int | None:
    """The size of a global variable of a scalar type, when its dimensions are numbers."""
    dtype = SCALAR_DTYPES.get(canonical_type(g.type_text, {}))
    count = _count(g.dims)
    if dtype is None or count is None:
        return None
    return (2 if dtype == "bfloat16" else np.dtype(dtype).itemsize) * count


def initial_values(src: CudaSource, facts: Facts) -> tuple[dict[str, int], dict[str, bytes]]:
    sizes, init = {}, {}
    for g in facts.globals.values():
        if not g.buffer:
            continue
        dtype = SCALAR_DTYPES.get(canonical_type(g.type_text, {}))
        count = _count(g.dims)
        if dtype is None or dtype == "bfloat16" or count is None:
            continue
        sizes[g.name] = np.dtype(dtype).itemsize * count
        values = _numbers(g.init) if g.init else None
        if values:
            parsed = [float(v.rstrip("fFuUlL")) if re.search(r"[.eE]", v) and not v.lower().startswith("0x")
                      else int(v.rstrip("uUlL"), 0) for v in values]
            arr = np.zeros(count, dtype)
            arr[:len(parsed)] = parsed[:count]
            init[g.name] = arr.tobytes()
    return sizes, init
