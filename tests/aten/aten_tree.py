"""A temporary tree laid out like a PyTorch checkout.

The torch wheel's real files (native_functions.yaml, tags.yaml, common_mps.py, the
c10/metal headers, the ATen/native stub headers) plus fixtures/tree/: kernels and
host files modeled on PyTorch's UnaryKernel.metal / BinaryKernel.metal and their
.mm files, the UnaryKernel.h they include, and the parts of test/test_mps.py that
verification reads. The fixtures are written for these tests, not copied.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch
import torchgen

FIXTURES = Path(__file__).parent / "fixtures"
TORCH = Path(torch.__file__).parent
TORCHGEN = Path(torchgen.__file__).parent
KERNELS = "aten/src/ATen/native/mps/kernels"
OPS = "aten/src/ATen/native/mps/operations"


def build_tree(root: Path) -> Path:
    native = root / "aten/src/ATen/native"
    shutil.copytree(FIXTURES / "tree", root)
    shutil.copy(TORCHGEN / "packaged/ATen/native/native_functions.yaml", native)
    shutil.copy(TORCHGEN / "packaged/ATen/native/tags.yaml", native)
    for header in ("UnaryOps.h", "BinaryOps.h", "PointwiseOps.h", "IndexKernel.h"):
        shutil.copy(TORCH / "include/ATen/native" / header, native)
    testing = root / "torch/testing/_internal"
    testing.mkdir(parents=True)
    shutil.copy(TORCH / "testing/_internal/common_mps.py", testing)
    shutil.copytree(TORCH / "include/c10/metal", root / "c10/metal")
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def functor(name: str) -> list[str]:
    return ["--functor", str(FIXTURES / "functors" / f"{name}.metal")]


HEAVISIDE = ["--expr", (FIXTURES / "functors/heaviside.expr").read_text().strip()]
FUNCTORS = {
    "heaviside": HEAVISIDE,
    "special_ndtri": functor("ndtri"),
    "special_log_ndtr": functor("log_ndtr"),
    "special_airy_ai": functor("airy_ai"),
    "special_laguerre_polynomial_l": functor("laguerre_polynomial_l"),
    "special_legendre_polynomial_p": functor("legendre_polynomial_p"),
}
TAKE = ["--kernel", str(FIXTURES / "take/take.metal")]
TAKE_NO_WRAP = ["--kernel", str(FIXTURES / "take/take_no_wrap.metal")]
