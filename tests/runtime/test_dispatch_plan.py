"""A call repeating an earlier one's arguments reuses its binding
(runtime/dispatch_plan.py): it must compute what a fresh binding computes,
see every change that matters (scalar bits, writability, a reallocated
array or tensor, buffer contents a store proof read), keep the store guard
where it is needed, and never keep an array alive."""

from __future__ import annotations

import gc
import warnings
import weakref

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel import KernelError
from metal_kernel.runtime import binding, store_guard

SRC = """#include <metal_stdlib>
using namespace metal;
kernel void axpy(device float* y, device const float* x, constant float& a, uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}
kernel void fill(device float* y, constant float& a, uint i [[thread_position_in_grid]]) {
  y[i] = a;
}
kernel void scatter(device const int* to, device float* y, uint i [[thread_position_in_grid]]) {
  y[to[i]] = float(i);
}
kernel void up_to(device float* y, device const uint* n, uint i [[thread_position_in_grid]]) {
  if (i < n[0]) y[i] = 1.0f;
}
kernel void read_past(device const float* x, device float* y, uint i [[thread_position_in_grid]]) {
  y[i] = x[i + 1];
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SRC, source_name="plan.metal")


@pytest.fixture
def binds(monkeypatch):
    """Counts the calls that bound their arguments afresh."""
    count = [0]
    real = binding.bind

    def spy(*a, **k):
        count[0] += 1
        return real(*a, **k)

    monkeypatch.setattr("metal_kernel.runtime.library.bind", spy)
    return count


def test_a_repeated_call_reuses_its_binding_and_computes_the_same(lib, binds):
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros(1000, np.float32)
    for k in range(1, 6):
        lib.axpy(y, x, 2.0, threads=1000, group_size=64)
        assert np.array_equal(y, 2.0 * k * x)
    assert binds[0] == 2  # the second call leaves the plan the others use


def test_scalar_bits_are_part_of_the_call(lib, binds):
    y = np.full(64, np.nan, np.float32)
    values = [1.5, 2.5, 0.0, -0.0] * 3  # from the third round on, every call has a plan
    for a in values:
        lib.fill(y, a, threads=64, group_size=32)
        assert np.array_equal(y.view(np.uint32), np.full(64, a, np.float32).view(np.uint32)), a
    assert binds[0] == 8


def test_an_array_made_read_only_is_refused_on_the_next_call(lib):
    y = np.zeros(64, np.float32)
    for _ in range(2):  # the second call leaves a plan
        lib.fill(y, 1.0, threads=64, group_size=32)
    y.flags.writeable = False
    with pytest.raises(ValueError, match="read-only numpy array"):
        lib.fill(y, 1.0, threads=64, group_size=32)


def test_a_reallocated_array_or_tensor_is_bound_again(lib):
    y = np.zeros(64, np.float32)
    for _ in range(2):
        lib.fill(y, 1.0, threads=64, group_size=32)
    y.resize(4096, refcheck=False)  # a new allocation, the same object
    y[:] = np.nan
    lib.fill(y, 3.0, threads=4096, group_size=64)
    assert (y == 3.0).all()
    t = torch.zeros(64)
    for _ in range(2):
        lib.fill(t, 1.0, threads=64, group_size=32)
    t.resize_(1 << 16)
    t.fill_(float("nan"))
    lib.fill(t, 4.0, threads=1 << 16, group_size=64)
    assert (t == 4.0).all()


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_a_store_guard_that_is_needed_runs_on_every_call(lib):
    # Indirect stores are never proven: every call runs on fenced copies,
    # so new contents of `to` that send a store out of bounds are caught.
    y = np.zeros(64, np.float32)
    to = np.arange(64, dtype=np.int32)[::-1].copy()
    for _ in range(2):  # the second call leaves a plan, which the third uses
        lib.scatter(to, y, threads=64, group_size=32)
    assert np.array_equal(y, np.arange(64, dtype=np.float32)[::-1])
    to[5] = 1000
    with pytest.raises(KernelError, match="out of bounds"):
        lib.scatter(to, y, threads=64, group_size=32)


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_a_proof_that_read_a_buffer_is_checked_again(lib, monkeypatch):
    # `if (i < n[0]) y[i]`: proven in bounds from n's contents; new contents
    # must be read again before the store runs unfenced.
    monkeypatch.setattr(store_guard, "COPY_WITHOUT_FACTS", 0)  # prove from the first call
    y = np.zeros(64, np.float32)
    n = np.array([64], np.uint32)
    for _ in range(2):  # the second call leaves a plan, which the third uses
        lib.up_to(y, n, threads=128, group_size=64)
    assert (y == 1).all()
    n[0] = 128
    with pytest.raises(KernelError, match="out of bounds"):
        lib.up_to(y, n, threads=128, group_size=64)


def test_the_checker_sees_a_repeated_call(lib):
    x, y = np.zeros(64, np.float32), np.zeros(64, np.float32)
    big = np.zeros(65, np.float32)
    for _ in range(3):
        lib.read_past(big, y, threads=64, group_size=32)
    with metal_kernel.check() as report:
        lib.read_past(x, y, threads=64, group_size=32)
    assert report.findings, "the out-of-bounds read went unseen"
    with metal_kernel.check() as report:
        lib.read_past(big, y, threads=64, group_size=32)
    assert not report.findings


def test_a_binding_that_warned_warns_again(lib):
    y = np.zeros(64, np.int32)  # read as float
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lib.fill(y, 1.0, threads=64, group_size=32)
        lib.fill(y, 1.0, threads=64, group_size=32)
    assert sum(issubclass(w.category, binding.BindingWarning) for w in caught) == 2


def test_a_plan_keeps_no_array_alive(lib):
    y = np.zeros(64, np.float32)
    ref = weakref.ref(y)
    for _ in range(3):
        lib.fill(y, 1.0, threads=64, group_size=32)
    del y
    gc.collect()
    assert ref() is None


def test_calls_from_several_threads_each_compute_their_own(lib):
    # Plans are shared by the threads calling one kernel; each call must
    # still write its own array with its own scalar.
    import threading

    errors = []

    def work(seed):
        ys = [np.zeros(64, np.float32) for _ in range(3)]
        try:
            for r in range(150):
                y, a = ys[r % 3], float(seed * 100 + r % 7)
                lib.fill(y, a, threads=64, group_size=32)
                assert (y == a).all(), (seed, r)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_tensors_without_plain_storage_are_refused_by_the_binding(lib):
    with pytest.raises(TypeError, match="only strided tensors bind"):
        lib.fill(torch.zeros(64).to_sparse(), 1.0, threads=64, group_size=32)
