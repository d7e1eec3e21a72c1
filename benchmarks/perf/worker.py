"""A process that times the contenders which keep threads of their own:
PyTorch's CPU operators and OpenBLAS's sgemm (through numpy), with as many
threads as metal-kernel's pool.

Their thread pools would otherwise live in the benchmark process, where
OpenMP and OpenBLAS threads spin after each call and take the cores the
next contender is timed on. Here PyTorch's OpenMP threads sleep between
calls (OMP_WAIT_POLICY=PASSIVE, set by the parent), and each call is timed
inside this process, so the pipe is not in the figure.

Protocol: one JSON object per line on stdin, one answer per line on stdout.
  {"op": "torch", "case": NAME, "size": [...], "threads": T}  set a case up
  {"op": "sgemm_case", "n": N}   set up OpenBLAS's sgemm at N x N as a case
  {"op": "run", "key": "torch" or "sgemm"}   one timed call of that case,
                       checked: {"s": seconds, "err": text or null}
  {"op": "sgemm", "n": N, "repeat": R, "warmup": W}   {"times_s": [...]}
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import data  # noqa: E402


class TorchCase:
    """One of PyTorch's operators on a case's data, and its check."""

    def __init__(self, name: str, size: list[int], threads: int):
        import torch
        import torch.nn.functional as F

        torch.set_num_threads(threads)
        self.name = name
        if name == "softmax":
            x = torch.from_numpy(data.rows_input(*size))
            self.call = lambda: torch.softmax(x, dim=-1)
            self.want, self.tol = data.softmax_ref(x.numpy()), (1e-4, 1e-7)
        elif name == "layer_norm":
            d = data.layer_norm_data(*size)
            x, w, b = (torch.from_numpy(d[k]) for k in ("x", "w", "b"))
            self.call = lambda: F.layer_norm(x, (x.shape[1],), w, b, d["eps"])
            self.want, self.tol = data.layer_norm_ref(d), (1e-4, 1e-4)
        elif name == "q4_matvec":
            # No q4_0 operator in PyTorch: the same product on the
            # dequantised float32 matrix (8x the bytes).
            d = data.q4_data(*size)
            w = torch.from_numpy(data.q4_dequantize(d["blocks"]))
            x = torch.from_numpy(d["x"])
            self.call = lambda: torch.mv(w, x)
            self.want, self.tol = data.q4_ref(d), (1e-3, 1e-3)
        elif name == "c10_unary":
            base = torch.from_numpy(data.strided_base(*size))
            x = base[:, ::2]
            self.call = lambda: torch.exp(x)
            self.want, self.tol = data.unary_ref(x.numpy()), (1e-5, 1e-6)
        else:
            raise ValueError(f"unknown case {name!r}")

    def run(self) -> dict:
        t = time.perf_counter()
        out = self.call()
        dt = time.perf_counter() - t
        err = data.close(self.name, out.numpy(), self.want, *self.tol)
        return {"s": dt, "err": err}


class SgemmCase:
    """OpenBLAS's sgemm (numpy's a @ b) at N x N, one call at a time: the
    matmul cases' limit, run in the same rounds as the kernels."""

    def __init__(self, n: int):
        self.a, self.b = sgemm_operands(n)
        self.corner = float(self.a[-1].astype(np.float64) @ self.b[:, -1])
        self.a @ self.b  # OpenBLAS's threads started

    def run(self) -> dict:
        # Its threads sleep between rounds (limits.Worker); a call first wakes
        # them and warms the caches, so the timed one is sgemm at its best,
        # as in the limit phases where it runs back to back.
        self.a @ self.b
        t = time.perf_counter()
        c = self.a @ self.b
        dt = time.perf_counter() - t
        ok = abs(float(c[-1, -1]) - self.corner) <= 1e-3 * max(1.0, abs(self.corner))
        return {"s": dt, "err": None if ok else f"sgemm's corner {c[-1, -1]} != {self.corner}"}


def sgemm_operands(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The two N x N float32 matrices every sgemm here multiplies."""
    r = np.random.default_rng(0)
    return r.uniform(-1, 1, (n, n)).astype(np.float32), r.uniform(-1, 1, (n, n)).astype(np.float32)


def sgemm(n: int, repeat: int, warmup: int) -> dict:
    a, b = sgemm_operands(n)
    for _ in range(warmup):
        a @ b
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t)
    return {"times_s": times}


def main():
    cases = {}
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if msg["op"] == "torch":
                cases["torch"] = TorchCase(msg["case"], msg["size"], msg["threads"])
                out = {"ok": True}
            elif msg["op"] == "sgemm_case":
                cases["sgemm"] = SgemmCase(msg["n"])
                out = {"ok": True}
            elif msg["op"] == "run":
                out = cases[msg.get("key", "torch")].run()
            elif msg["op"] == "sgemm":
                out = sgemm(msg["n"], msg["repeat"], msg["warmup"])
            else:
                out = {"error": f"unknown op {msg['op']!r}"}
        except Exception as e:  # noqa: BLE001 - reported to the parent
            out = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
