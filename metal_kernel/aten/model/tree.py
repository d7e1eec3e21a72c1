"""Where things live in a PyTorch checkout, and in the installed torch wheel.

`PyTorchTree` is the single place that knows the checkout layout; everything else
asks it for paths. `PyTorchTree.installed()` maps the same roles onto the files the
torch wheel ships (used by `coverage` when no checkout is given).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import AtenError

# Role -> path relative to the checkout root. One table, no scattered literals.
CHECKOUT_LAYOUT = {
    "native_functions": "aten/src/ATen/native/native_functions.yaml",
    "tags": "aten/src/ATen/native/tags.yaml",
    "native_dir": "aten/src/ATen/native",
    "kernels_dir": "aten/src/ATen/native/mps/kernels",
    "operations_dir": "aten/src/ATen/native/mps/operations",
    "common_mps": "torch/testing/_internal/common_mps.py",
    "c10_metal": "c10/metal",
}

# Files whose absence means "this is not a PyTorch checkout".
REQUIRED_ROLES = ("native_functions", "common_mps")


def _torch_dir() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent


def _torchgen_dir() -> Path:
    import torchgen

    return Path(torchgen.__file__).resolve().parent


@dataclass(frozen=True)
class PyTorchTree:
    """Paths of one PyTorch source tree (or of the installed wheel)."""

    root: Path | None
    native_functions: Path
    tags: Path
    native_dir: Path
    kernels_dir: Path
    operations_dir: Path
    common_mps: Path
    c10_metal: Path

    @classmethod
    def from_root(cls, root: str | os.PathLike) -> "PyTorchTree":
        root = Path(root).resolve()
        if not root.is_dir():
            raise AtenError("not a PyTorch checkout: directory does not exist", root)
        paths = {role: root / rel for role, rel in CHECKOUT_LAYOUT.items()}
        for role in REQUIRED_ROLES:
            if not paths[role].is_file():
                raise AtenError(
                    f"not a PyTorch checkout: missing {CHECKOUT_LAYOUT[role]}", root
                )
        if not paths["tags"].is_file():
            # Older checkouts keep tags elsewhere; torchgen only needs the tag names.
            paths["tags"] = _torchgen_dir() / "packaged/ATen/native/tags.yaml"
        return cls(root=root, **paths)

    @classmethod
    def installed(cls) -> "PyTorchTree":
        torch_dir, tg = _torch_dir(), _torchgen_dir()
        include = torch_dir / "include"
        return cls(
            root=None,
            native_functions=tg / "packaged/ATen/native/native_functions.yaml",
            tags=tg / "packaged/ATen/native/tags.yaml",
            native_dir=include / "ATen/native",
            kernels_dir=include / "ATen/native/mps/kernels",
            operations_dir=include / "ATen/native/mps/operations",
            common_mps=torch_dir / "testing/_internal/common_mps.py",
            c10_metal=include / "c10/metal",
        )

    @property
    def include_dir(self) -> Path:
        """Directory to pass as include path so `#include <c10/metal/...>` resolves."""
        return self.c10_metal.parent.parent

    def relative(self, path: Path) -> str:
        if self.root is not None:
            try:
                return str(Path(path).resolve().relative_to(self.root))
            except ValueError:
                pass
        return str(path)
