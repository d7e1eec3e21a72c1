"""Fixtures for test modules that run one SOURCE both ways: work-item loops
(the default for synchronising kernels) and fibers."""

import pytest

import metal_kernel


@pytest.fixture(scope="module")
def fiber_lib(request):
    """The module's SOURCE compiled with METAL_KERNEL_WORKITEM_LOOPS=0."""
    mp = pytest.MonkeyPatch()
    mp.setenv("METAL_KERNEL_WORKITEM_LOOPS", "0")
    try:
        return metal_kernel.compile_shader(request.module.SOURCE)
    finally:
        mp.undo()


@pytest.fixture(params=["workitem", "fibers"])
def both(request, lib, fiber_lib):
    """The module's `lib`, then the same source on fibers."""
    return lib if request.param == "workitem" else fiber_lib
