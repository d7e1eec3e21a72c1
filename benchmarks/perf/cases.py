"""The benchmark's cases: each kernel's data, how metal-kernel, PoCL and
PyTorch run it, how every run is checked, its work (bytes or FLOPs), the
limit it is measured against and its targets (issue 14)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import data
import kernels
from data import close
from timing import Side

POCL_LOCAL_SIZES = (None, 256, 1024, 4096)  # None: PoCL chooses (a NULL local size)


@dataclass
class Case:
    key: str
    letter: str
    title: str
    full: tuple
    quick: tuple
    size_text: Callable[[tuple], str]
    work: Callable[[tuple], float]  # bytes moved or FLOPs of one run
    unit: str  # "bytes" or "flops"
    limit: str  # "triad", "copy", "read" or "sgemm"
    library: str  # kernels.LIBRARIES key
    setup: Callable[[tuple], dict]
    ours: Callable  # (lib, data) -> Side
    pocl: Callable | None = None  # (ocl, data) -> {name: Side}
    torch: str | None = None  # the worker's case name (PyTorch's operator)
    torch_title: str = ""
    targets: dict = field(default_factory=dict)  # "pocl": max ratio, "limit": min fraction
    notes: list = field(default_factory=list)
    # Also time metal-kernel with METAL_KERNEL_STREAMING_STORES=0: what the
    # streaming stores are worth on this machine.
    ordinary_stores_side: bool = False


def _poisoned(out: np.ndarray):
    return lambda: out.fill(np.nan)


# ------------------------------------------------------------------ saxpy --

def setup_saxpy(size):
    (n,) = size
    r = data.rng()
    x = data.aligned(r.random(n, dtype=np.float32))
    y = data.aligned(r.random(n, dtype=np.float32))
    a = 2.5
    return {"n": n, "x": x, "y": y, "a": a, "want": (np.float32(a) * x + y).astype(np.float32),
            "out": data.aligned(np.empty(n, np.float32)), "y_work": data.aligned(np.empty(n, np.float32))}


def _check_saxpy(d):
    return lambda o: close("out", o, d["want"], rtol=1e-5, atol=1e-6)


def ours_saxpy(lib, d):
    k, out = lib.saxpy, d["out"]
    return Side(lambda: k(out, d["x"], d["y"], d["a"], threads=d["n"], group_size=256),
                _poisoned(out), lambda: out, _check_saxpy(d))


def ours_saxpy_inplace(lib, d):
    k, y = lib.saxpy_inplace, d["y_work"]
    return Side(lambda: k(y, d["x"], d["a"], threads=d["n"], group_size=256),
                lambda: np.copyto(y, d["y"]), lambda: y, _check_saxpy(d))


def with_ordinary_stores(side: Side) -> Side:
    """`side` with METAL_KERNEL_STREAMING_STORES=0 during its calls."""
    import os

    run = side.run

    def ordinary():
        old = os.environ.get("METAL_KERNEL_STREAMING_STORES")
        os.environ["METAL_KERNEL_STREAMING_STORES"] = "0"
        try:
            return run()
        finally:
            if old is None:
                del os.environ["METAL_KERNEL_STREAMING_STORES"]
            else:
                os.environ["METAL_KERNEL_STREAMING_STORES"] = old
    side.run = ordinary
    return side


def _local_name(local) -> str:
    return f"pocl_local_{local or 'null'}"


def pocl_saxpy(ocl, d):
    k = ocl.cl.Kernel(ocl.program(kernels.OCL)[0], "saxpy")
    n = d["n"]
    x, y, out = ocl.buffer_in(d["x"]), ocl.buffer_in(d["y"]), ocl.buffer_out(4 * n)
    host = np.empty(n, np.float32)
    k.set_args(out, x, y, np.float32(d["a"]))
    ocl.keep([x, y, out])  # pyopencl kernels do not keep their argument buffers alive
    return {_local_name(ls): Side(lambda ls=ls: ocl.run(k, (n,), (ls,) if ls else None),
                                  lambda: ocl.poison(out, 4 * n), lambda: ocl.read(host, out), _check_saxpy(d))
            for ls in POCL_LOCAL_SIZES}


def pocl_saxpy_inplace(ocl, d):
    k = ocl.cl.Kernel(ocl.program(kernels.OCL)[0], "saxpy_inplace")
    n = d["n"]
    x, y = ocl.buffer_in(d["x"]), ocl.buffer_out(4 * n)
    host = np.empty(n, np.float32)
    k.set_args(y, x, np.float32(d["a"]))
    ocl.keep([x, y])
    return {_local_name(ls): Side(lambda ls=ls: ocl.run(k, (n,), (ls,) if ls else None),
                                  lambda: ocl.write(y, d["y"]), lambda: ocl.read(host, y), _check_saxpy(d))
            for ls in POCL_LOCAL_SIZES}


# ------------------------------------------------------------- reductions --

def setup_reduce(size):
    (n,) = size
    x = data.aligned(data.rng().random(n, dtype=np.float32))
    return {"n": n, "x": x, "want_partials": x.reshape(-1, 256).astype(np.float64).sum(1),
            "want_total": float(x.astype(np.float64).sum()), "out": data.aligned(np.empty(n // 256, np.float32))}


def _check_partials(d):
    def check(p):
        err = close("partial sums", p, d["want_partials"], rtol=1e-4, atol=1e-3)
        if err:
            return err
        total = float(p.astype(np.float64).sum())
        return None if np.isclose(total, d["want_total"], rtol=1e-5) else f"total {total} != {d['want_total']}"
    return check


def _ours_reduce(name):
    def make(lib, d):
        k, out = getattr(lib, name), d["out"]
        return Side(lambda: k(d["x"], out, threads=d["n"], group_size=256), _poisoned(out), lambda: out,
                    _check_partials(d))
    return make


def _pocl_reduce(twins: dict):
    """twins: side name -> (OpenCL source, kernel name)."""
    def make(ocl, d):
        n, m = d["n"], d["n"] // 256
        x = ocl.buffer_in(d["x"])
        out = ocl.buffer_out(4 * m)
        host = np.empty(m, np.float32)
        ocl.keep([x, out])
        sides = {}
        for side, (src, name) in twins.items():
            if src is None:
                continue
            k = ocl.cl.Kernel(ocl.program(src)[0], name)
            k.set_args(x, out)
            sides[side] = Side(lambda k=k: ocl.run(k, (n,), (256,)), lambda: ocl.poison(out, 4 * m),
                               lambda: ocl.read(host, out), _check_partials(d))
        return sides
    return make


def pocl_simd_reduce(ocl, d):
    if ocl.subgroups:
        return _pocl_reduce({"pocl_subgroups": (kernels.OCL_SUBGROUPS, "reduce_simd")})(ocl, d)
    return _pocl_reduce({"pocl_tree": (kernels.OCL, "reduce_simd"),
                         "pocl_serial": (kernels.OCL, "reduce_simd_serial")})(ocl, d)


# --------------------------------------------------------------- matmuls --

def setup_matmul(size):
    (n,) = size
    r = data.rng()
    a = data.aligned(r.uniform(-1, 1, (n, n)).astype(np.float32))
    b = data.aligned(r.uniform(-1, 1, (n, n)).astype(np.float32))
    return {"n": n, "A": a, "B": b, "want": a.astype(np.float64) @ b.astype(np.float64),
            "out": data.aligned(np.empty((n, n), np.float32))}


def _check_mm(d):
    return lambda o: close("C", o.astype(np.float64), d["want"], rtol=1e-4, atol=2e-4 * np.sqrt(d["n"]))


def ours_matmul(lib, d):
    k, out, n = lib.matmul_tiled, d["out"], d["n"]
    return Side(lambda: k(d["A"], d["B"], out, n, threads=[n, n], group_size=[16, 16], arg_casts={3: "int32"}),
                _poisoned(out), lambda: out, _check_mm(d))


def pocl_matmul(ocl, d):
    k = ocl.cl.Kernel(ocl.program(kernels.OCL)[0], "matmul_tiled")
    n = d["n"]
    a, b, out = ocl.buffer_in(d["A"]), ocl.buffer_in(d["B"]), ocl.buffer_out(4 * n * n)
    host = np.empty((n, n), np.float32)
    k.set_args(a, b, out, np.uint32(n))
    ocl.keep([a, b, out])
    return {"pocl": Side(lambda: ocl.run(k, (n, n), (16, 16)), lambda: ocl.poison(out, 4 * n * n),
                         lambda: ocl.read(host, out), _check_mm(d))}


def ours_gemm(lib, d):
    k, out, n = lib.gemm_simdgroup, d["out"], d["n"]
    return Side(lambda: k(d["A"], d["B"], out, n, threadgroups=[n // 32, n // 32], group_size=[128],
                          arg_casts={3: "int32"}),
                _poisoned(out), lambda: out, _check_mm(d))


# ------------------------------------------------ kernels like real ones --

def setup_softmax(size):
    x = data.aligned(data.rows_input(*size))
    return {"x": x, "want": data.softmax_ref(x), "out": data.aligned(np.empty_like(x))}


def ours_softmax(lib, d):
    k, out, (rows, cols) = lib.softmax_rows, d["out"], d["x"].shape
    return Side(lambda: k(d["x"], out, cols, threadgroups=[rows], group_size=[256], arg_casts={2: "int32"}),
                _poisoned(out), lambda: out, lambda o: close("softmax", o, d["want"], rtol=1e-4, atol=1e-7))


def setup_q4(size):
    d = data.q4_data(*size)
    d["raw"] = data.aligned(d["blocks"].view(np.uint8).reshape(-1))
    d["x"] = data.aligned(d["x"])
    d["want"] = data.q4_ref(d)
    d["out"] = data.aligned(np.empty(d["rows"], np.float32))
    return d


def ours_q4(lib, d):
    k, out = lib.mul_mv_q4_0, d["out"]
    rows_per_group = 2 * 4  # 2 simdgroups of 64-thread groups, 4 rows each
    return Side(lambda: k(d["raw"], d["x"], out, d["cols"], threadgroups=[d["rows"] // rows_per_group],
                          group_size=[64], arg_casts={3: "int32"}),
                _poisoned(out), lambda: out, lambda o: close("y", o, d["want"], rtol=1e-3, atol=1e-3))


def setup_layer_norm(size):
    d = {k: data.aligned(v) if isinstance(v, np.ndarray) else v for k, v in data.layer_norm_data(*size).items()}
    d["want"] = data.layer_norm_ref(d)
    d["out"] = data.aligned(np.empty_like(d["x"]))
    return d


def ours_layer_norm(lib, d):
    k, out, (rows, cols) = lib.layer_norm, d["out"], d["x"].shape
    return Side(lambda: k(d["x"], out, d["w"], d["b"], cols, d["eps"], threadgroups=[rows], group_size=[256],
                          arg_casts={4: "int32", 5: "float32"}),
                _poisoned(out), lambda: out, lambda o: close("y", o, d["want"], rtol=1e-4, atol=1e-4))


def setup_c10_unary(size):
    import torch

    base = torch.from_numpy(data.strided_base(*size))
    x = base[:, ::2]
    return {"x": x, "want": data.unary_ref(x.numpy()), "out": torch.empty(x.shape, dtype=torch.float32)}


def ours_c10_unary(lib, d):
    """Called the way PyTorch's MPS host code calls it: sizes and byte
    strides innermost first, a 2-D grid (innermost dimension, the rest)."""
    x, out = d["x"], d["out"]
    k = lib.exp_strided_float_float

    def strides(t):
        return [s * t.element_size() for s in reversed(t.stride())]
    inner, outer = x.shape[-1], x.numel() // x.shape[-1]
    args = (out, x, list(reversed(x.shape)), strides(x), strides(out), x.ndim)
    return Side(lambda: k(*args, arg_casts={5: "int32"}, threads=[inner, outer], group_size=[256, 1]),
                lambda: out.fill_(float("nan")), lambda: out.numpy(),
                lambda o: close("exp", o, d["want"], rtol=1e-5, atol=1e-6))


def _dims(size) -> str:
    return "x".join(str(s) for s in size)


CASES = [
    Case("saxpy", "a", "saxpy out = a*x + y", (1 << 24,), (1 << 20,), lambda s: f"{s[0] >> 20}M floats",
         lambda s: 12.0 * s[0], "bytes", "triad", "main", setup_saxpy, ours_saxpy, pocl_saxpy,
         targets={"pocl": 1.0, "limit": 0.8}, ordinary_stores_side=True),
    Case("saxpy_inplace", "a2", "saxpy in place y = a*x + y", (1 << 24,), (1 << 20,),
         lambda s: f"{s[0] >> 20}M floats", lambda s: 12.0 * s[0], "bytes", "triad", "main", setup_saxpy,
         ours_saxpy_inplace, pocl_saxpy_inplace, targets={"pocl": 1.0, "limit": 0.8}),
    Case("reduce", "b", "256-wide tree reduction, barrier per level", (1 << 24,), (1 << 20,),
         lambda s: f"{s[0] >> 20}M floats", lambda s: 4.0 * s[0], "bytes", "read", "main", setup_reduce,
         _ours_reduce("reduce_tree"), _pocl_reduce({"pocl": (kernels.OCL, "reduce_tree")}), targets={"pocl": 1.0}),
    Case("matmul", "c", "16x16-tiled matmul in threadgroup memory", (512,), (128,), lambda s: f"{s[0]}^3",
         lambda s: 2.0 * s[0] ** 3, "flops", "sgemm", "main", setup_matmul, ours_matmul, pocl_matmul,
         targets={"pocl": 1.0, "limit": 0.25}),
    Case("simd_reduce", "d", "two-level simd_sum reduction", (1 << 24,), (1 << 20,),
         lambda s: f"{s[0] >> 20}M floats", lambda s: 4.0 * s[0], "bytes", "read", "main", setup_reduce,
         _ours_reduce("reduce_simd"), pocl_simd_reduce, targets={"pocl": 1.0}),
    Case("simd_gemm", "e", "simdgroup-matrix GEMM", (512,), (128,), lambda s: f"{s[0]}^3",
         lambda s: 2.0 * s[0] ** 3, "flops", "sgemm", "gemm", setup_matmul, ours_gemm, targets={"limit": 0.5}),
    Case("softmax", "f", "row softmax, simd_max / simd_sum (MLX style)", (8192, 1024), (512, 1024), _dims,
         lambda s: 8.0 * s[0] * s[1], "bytes", "copy", "softmax", setup_softmax, ours_softmax,
         torch="softmax", torch_title="torch.softmax"),
    Case("q4_matvec", "g", "q4_0 matrix-vector product (ggml style)", (16384, 8192), (2048, 2048), _dims,
         lambda s: s[0] * s[1] * 18 / 32 + 4.0 * (s[0] + s[1]), "bytes", "read", "q4", setup_q4, ours_q4,
         torch="q4_matvec", torch_title="torch.mv, dequantised float32"),
    Case("layer_norm", "h", "layer norm, threadgroup reductions", (8192, 1024), (512, 1024), _dims,
         lambda s: 8.0 * s[0] * s[1] + 8.0 * s[1], "bytes", "copy", "layernorm", setup_layer_norm,
         ours_layer_norm, torch="layer_norm", torch_title="F.layer_norm"),
    # Reads every other element of each row: all of the base's cache lines.
    Case("c10_unary", "i", "c10::metal exp over a strided view (PyTorch's unary_strided)", (4096, 4096),
         (1024, 1024), lambda s: f"{s[0]}x{s[1] // 2} of {s[0]}x{s[1]}",
         lambda s: 4.0 * s[0] * s[1] + 2.0 * s[0] * s[1], "bytes", "copy", "c10_unary", setup_c10_unary,
         ours_c10_unary, torch="c10_unary", torch_title="torch.exp"),
]
