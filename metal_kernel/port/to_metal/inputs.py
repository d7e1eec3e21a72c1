"""Inputs for verify_all: a kernel's arguments and launch, from a launch the
file's own program made (capture.py: its sizes, scalars and the contents of
its buffers when the kernel ran) or, without one, from `sizes`.

`sizes` (every key optional): "n" elements per buffer (default 1024),
"block" (default 128, at most the kernel's limit), "grid" (default enough
blocks for n threads), "shared_mem" bytes, and per parameter name a value
(scalars) or an element count (buffers). Buffers the kernel only writes
start poisoned (NaN, or 0xA5 bytes); the others random (floats in [-1, 1),
integers in [0, n)).
"""

from __future__ import annotations

import numpy as np

from .model import KernelPort


def poison(dtype, n: int) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(n, np.nan, dt)
    return np.full(n * dt.itemsize, 0xA5, np.uint8).view(dt).copy()


def _buffer(p, n: int, rng: np.random.Generator) -> np.ndarray:
    dtype = p.dtype or "float32"
    if dtype == "bfloat16":
        f = rng.uniform(-1.0, 1.0, n).astype(np.float32)
        bits = f.view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if dtype == "float64":
        dtype = "float64"
    dt = np.dtype(dtype)
    if p.usage == "out":
        return poison(dt, n)
    if dt.kind == "f":
        return rng.uniform(-1.0, 1.0, n).astype(dt)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(dt)
    return rng.integers(0, max(1, min(n, np.iinfo(dt).max)), n).astype(dt)


def make_launch(k: KernelPort, sizes: dict, capture: dict | None, seed: int = 0):
    """(args, launch, notes)."""
    if capture is not None:
        return from_capture(k, capture)
    rng = np.random.default_rng(seed)
    n = int(sizes.get("n", 1024))
    block = sizes.get("block", min(128, k.max_threads))
    bx = block if isinstance(block, int) else block[0]
    grid = sizes.get("grid", max(1, -(-n // bx)))
    args, notes = [], []
    for p in k.params:
        if p.kind == "buffer":
            if p.elem_bytes is None and p.dtype is None:
                raise ValueError(f"kernel '{k.spelling}': cannot make inputs for '{p.name}' ({p.cuda_type}*): "
                                 "pass them to verify() yourself")
            count = int(sizes.get(p.name, n))
            if p.dtype is None:  # a struct or vector element: random bytes
                args.append(rng.integers(0, 256, count * p.elem_bytes, dtype=np.uint8).view(np.uint8))
                notes.append(f"'{p.name}' ({p.cuda_type}) filled with random bytes")
            else:
                args.append(_buffer(p, count, rng))
        elif p.kind == "scalar":
            if p.name in sizes:
                args.append(sizes[p.name])
            elif np.dtype("float32" if p.dtype == "bfloat16" else p.dtype).kind == "f":
                args.append(float(np.float32(rng.uniform(0.5, 2.0))))
            elif p.dtype == "bool":
                args.append(True)
            else:
                args.append(n)
        else:
            raise ValueError(f"kernel '{k.spelling}': parameter '{p.name}' is a struct ({p.cuda_type}); "
                             "pass its bytes in sizes or call verify() yourself")
    launch = {"grid": grid, "block": block, "shared_mem": int(sizes.get("shared_mem", 0))}
    return args, launch, notes


def _host_value(a: dict):
    """The recorded host value as a Python number (the launcher converts it
    to the parameter's type, as the launch did)."""
    raw, kind = a["bytes"], a.get("type", "struct")
    n = len(raw)
    if kind == "f" and n in (2, 4, 8):
        return float(np.frombuffer(raw, {2: np.float16, 4: np.float32, 8: np.float64}[n])[0])
    if kind in ("i", "u") and n in (1, 2, 4, 8):
        return int(np.frombuffer(raw, np.dtype(f"{kind}{n}"))[0])
    if n == 1:
        return bool(raw[0])
    return raw


def from_capture(k: KernelPort, cap: dict):
    """A launch recorded from the program: its buffers (the data the kernel
    saw, outputs poisoned), scalars and geometry."""
    args, notes = [], [f"inputs from the file's own launch at {cap.get('where', 'its host code')}"]
    for p, a in zip(k.params, cap["args"]):
        if p.kind == "buffer":
            if a.get("data") is None:
                if a.get("null"):
                    args.append(None)
                    continue
                raise ValueError(f"kernel '{k.spelling}': argument '{p.name}' of the recorded launch is not "
                                 "device memory from cudaMalloc")
            raw = np.frombuffer(a["data"], np.uint8)
            dtype = "uint16" if p.dtype == "bfloat16" else (p.dtype or "uint8")
            n = len(raw) // np.dtype(dtype).itemsize
            arr = raw[:n * np.dtype(dtype).itemsize].view(dtype).copy()
            if p.usage == "out" and dtype != "uint8":
                arr = poison(dtype, n) if p.dtype != "bfloat16" else np.full(n, 0x7FC1, np.uint16)
            args.append(arr)
        elif p.kind == "scalar":
            args.append(_host_value(a))
        else:
            args.append(a["bytes"])
    if len(cap["args"]) != len(k.params):
        raise ValueError(f"kernel '{k.spelling}': the recorded launch has {len(cap['args'])} arguments, the "
                         f"kernel {len(k.params)}")
    launch = {"grid": tuple(cap["grid"]), "block": tuple(cap["block"]), "shared_mem": int(cap.get("smem", 0))}
    return args, launch, notes
