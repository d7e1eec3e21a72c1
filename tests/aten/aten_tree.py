"""A temporary tree laid out like a PyTorch checkout, built from the torch wheel's
real files (native_functions.yaml, tags.yaml, common_mps.py, c10/metal headers,
ATen/native stub headers) plus our own PyTorch-style .metal/.mm fixtures."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
import torchgen

FIXTURES = Path(__file__).parent / "fixtures"
TORCH = Path(torch.__file__).parent
TORCHGEN = Path(torchgen.__file__).parent


def build_tree(root: Path) -> Path:
    native = root / "aten/src/ATen/native"
    (native / "mps/kernels").mkdir(parents=True)
    (native / "mps/operations").mkdir(parents=True)
    shutil.copy(TORCHGEN / "packaged/ATen/native/native_functions.yaml", native)
    shutil.copy(TORCHGEN / "packaged/ATen/native/tags.yaml", native)
    for header in ("UnaryOps.h", "BinaryOps.h", "PointwiseOps.h", "IndexKernel.h"):
        shutil.copy(TORCH / "include/ATen/native" / header, native)
    testing = root / "torch/testing/_internal"
    testing.mkdir(parents=True)
    shutil.copy(TORCH / "testing/_internal/common_mps.py", testing)
    shutil.copytree(TORCH / "include/c10/metal", root / "c10/metal")
    for name in ("UnaryKernel.metal", "BinaryKernel.metal"):
        shutil.copy(FIXTURES / name, native / "mps/kernels")
    for name in ("UnaryKernel.mm", "BinaryKernel.mm", "UnaryOps.mm"):
        shutil.copy(FIXTURES / name, native / "mps/operations")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


HEAVISIDE = ["--expr", (FIXTURES / "heaviside.expr").read_text().strip()]
FUNCTORS = {
    "heaviside": HEAVISIDE,
    "special_ndtri": ["--functor", str(FIXTURES / "ndtri_functor.metal")],
    "special_airy_ai": ["--functor", str(FIXTURES / "airy_ai_functor.metal")],
    "special_laguerre_polynomial_l": ["--functor", str(FIXTURES / "laguerre_polynomial_l_functor.metal")],
}
TAKE = ["--kernel", str(FIXTURES / "take.metal")]
TAKE_NO_WRAP = ["--kernel", str(FIXTURES / "take_no_wrap.metal")]
