"""Inputs and references of the kernels written like real ones, generated
from a seed, so that the benchmark process and the worker that times
PyTorch (benchmarks/perf/worker.py) build the same data independently.
Depends on numpy only."""

from __future__ import annotations

import numpy as np

SEED = 1234
QK4_0 = 32
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK4_0 // 2,))])  # 18 bytes, as ggml's block_q4_0


def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def aligned(a: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A copy of `a` starting on an `alignment`-byte boundary, as PoCL's
    buffers and PyTorch's tensors do (numpy's large arrays start 16 bytes
    past one, and a 64-byte vector access then spans two cache lines)."""
    raw = np.empty(a.nbytes + alignment, np.uint8)
    off = -raw.ctypes.data % alignment
    out = raw[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def rows_input(rows: int, cols: int) -> np.ndarray:
    return rng().standard_normal((rows, cols), dtype=np.float32)


def softmax_ref(x: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm_data(rows: int, cols: int) -> dict:
    r = rng()
    return {"x": r.standard_normal((rows, cols), dtype=np.float32),
            "w": r.uniform(0.5, 1.5, cols).astype(np.float32),
            "b": r.uniform(-0.5, 0.5, cols).astype(np.float32), "eps": 1e-5}


def layer_norm_ref(d: dict) -> np.ndarray:
    x = d["x"].astype(np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + d["eps"]) * d["w"] + d["b"]


def q4_data(rows: int, cols: int) -> dict:
    """A q4_0 matrix (rows x cols/32 blocks) and an input vector."""
    r = rng()
    blocks = np.empty((rows, cols // QK4_0), Q4_BLOCK)
    blocks["d"] = r.uniform(0.001, 0.02, blocks.shape).astype(np.float16)
    blocks["qs"] = r.integers(0, 256, blocks.shape + (QK4_0 // 2,), dtype=np.uint8)
    return {"blocks": blocks, "x": r.standard_normal(cols, dtype=np.float32), "rows": rows, "cols": cols}


def q4_dequantize(blocks: np.ndarray) -> np.ndarray:
    """w[j] = d * ((qs[j] & 15) - 8), w[j + 16] = d * ((qs[j] >> 4) - 8)."""
    q = blocks["qs"]
    lo = (q & 0x0F).astype(np.float32) - 8.0
    hi = (q >> 4).astype(np.float32) - 8.0
    w = np.concatenate([lo, hi], axis=-1) * blocks["d"].astype(np.float32)[..., None]
    return w.reshape(blocks.shape[0], -1)


def q4_ref(d: dict) -> np.ndarray:
    return q4_dequantize(d["blocks"]).astype(np.float64) @ d["x"].astype(np.float64)


def strided_base(rows: int, cols: int) -> np.ndarray:
    """The tensor whose every other column the unary case reads."""
    return rng().uniform(-4, 4, (rows, cols)).astype(np.float32)


def unary_ref(x: np.ndarray) -> np.ndarray:
    return np.exp(x.astype(np.float64))


def close(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when `got` matches `want`, else which elements do not."""
    if got.shape != want.shape:
        return f"{name}: shape {got.shape} != {want.shape}"
    bad = ~np.isclose(got, want, rtol=rtol, atol=atol)
    if bad.any():
        idx = np.flatnonzero(bad.ravel())
        k = int(idx[0])
        return (f"{name}: {idx.size} of {got.size} elements wrong (first at flat index {k}: "
                f"got {got.ravel()[k]!r}, want {want.ravel()[k]!r})")
    return None
