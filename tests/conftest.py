import atexit
import os
import shutil
import tempfile

import pytest

# `pytest --metal-check` and the `metal_check` fixture come from the
# pytest11 entry point metal-kernel installs (pyproject.toml).

# Each test session compiles into its own cache unless the caller chose one,
# so results never depend on what an earlier run left behind.
# (Set before pytest-xdist starts its workers, so they share it; the process
# that made it removes it when it exits.)
if "METAL_KERNEL_CACHE_DIR" not in os.environ:
    os.environ["METAL_KERNEL_CACHE_DIR"] = _cache = tempfile.mkdtemp(prefix="mk-test-cache-")
    atexit.register(shutil.rmtree, _cache, ignore_errors=True)


@pytest.fixture
def poison():
    """Fill a fresh tensor with a value no kernel computes by accident."""
    import torch

    def make(shape, dtype=None):
        import torch as _t

        dtype = dtype or _t.float32
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if dtype.is_floating_point or dtype.is_complex:
            return _t.full(shape, float("nan"), dtype=dtype)
        if dtype == _t.bool:
            return _t.zeros(shape, dtype=dtype)
        return _t.full(shape, -0x5A5A5A5A if dtype in (_t.int32, _t.int64) else 0x5A, dtype=dtype)

    return make
