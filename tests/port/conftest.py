"""Shared pieces of the port tests: ports made once per module."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from metal_kernel.port import port_cuda

KERNELS = Path(__file__).resolve().parent / "kernels"


def poisoned(n: int, dtype=np.float32) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return np.full(n, np.nan, dt)
    return np.full(n * dt.itemsize, 0xA5, np.uint8).view(dt).copy()


@pytest.fixture(scope="session")
def rules_port():
    path = KERNELS / "rules.cu"
    return port_cuda(path.read_text(), filename=str(path))
