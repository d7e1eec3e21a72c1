"""Bounds-checked stores (runtime/store_guard.py): a store past a buffer is a
KernelError naming it and never touches the caller's memory; stores proven in
bounds run unfenced; aliases stay aliases on the fenced copies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel import KernelError
from metal_kernel.runtime import store_guard

SRC = """#include <metal_stdlib>
using namespace metal;
kernel void shift(device const float* x, device float* y, uint i [[thread_position_in_grid]]) {
  y[i + 1] = x[i];
}
kernel void before(device float* y, uint i [[thread_position_in_grid]]) {
  if (i == 3) y[int(i) - 5] = 1;
  else y[i] = 2;
}
kernel void far(device float* y, uint i [[thread_position_in_grid]]) {
  y[i * 100000u] = 1;
}
kernel void copy(device const float* x, device float* y, uint i [[thread_position_in_grid]]) {
  y[i] = x[i];
}
kernel void guarded_copy(device const float* x, device float* y, constant uint& n,
                         uint i [[thread_position_in_grid]]) {
  if (i < n) y[i] = x[i];
}
kernel void scatter(device const float* x, device const int* to, device float* y,
                    uint i [[thread_position_in_grid]]) {
  y[to[i]] = x[i];
}
kernel void axpy(device float* y, device const float* x, constant float& a, uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}
kernel void rotate(device const float* x, device float* y, uint i [[thread_position_in_grid]],
                   uint n [[threads_per_grid]]) {
  threadgroup float t[64];
  t[i % 64] = x[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[(i + 1) % n] = t[i % 64];
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SRC, source_name="guard.metal")


@pytest.fixture
def fenced(monkeypatch):
    """Counts the dispatches that ran on fenced copies."""
    seen = []
    real = store_guard.run_fenced

    def spy(kernel, b, written, launch_fn):
        seen.append((kernel.name, sorted(written)))
        return real(kernel, b, written, launch_fn)

    monkeypatch.setattr(store_guard, "run_fenced", spy)
    return seen


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_a_store_one_past_the_end_is_an_error_and_the_output_keeps_its_contents(lib, fenced):
    y = torch.full((100,), float("nan"))
    with pytest.raises(KernelError, match=r"kernel 'shift': an access out of bounds by thread \[99, 0, 0\] "
                                          r"\(threadgroup \[3, 0, 0\]\): byte offset 400 of buffer 1 'y', "
                                          r"which holds 400 bytes") as e:
        lib.shift(torch.ones(100), y, threads=100, group_size=32)
    assert e.value.thread == [99, 0, 0]
    assert torch.isnan(y).all()  # nothing written: the kernel ran on copies
    assert fenced == [("shift", [1])]


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_stores_before_the_start_and_far_past_the_end_are_errors_too(lib):
    y = np.full(8, -1.0, np.float32)
    with pytest.raises(KernelError, match=r"a store out of bounds: 8 bytes before the start of buffer 0 'y'"):
        lib.before(y, threads=8, group_size=8)
    assert (y == -1).all()
    with pytest.raises(KernelError, match=r"byte offset 400000 of buffer 0 'y', which holds 400 bytes"):
        lib.far(torch.zeros(100), threads=100, group_size=32)


def test_in_bounds_stores_that_cannot_be_proven_run_fenced_and_give_the_same_result(lib, fenced):
    n = 1000
    x, to = torch.rand(n), torch.randperm(n).int()
    y = torch.full((n,), float("nan"))
    lib.scatter(x, to, y, threads=n, group_size=64)
    want = torch.empty(n)
    want[to.long()] = x
    assert torch.equal(y, want)
    assert fenced == [("scatter", [2])]


def test_aliased_buffers_stay_aliases_on_the_copies(lib, fenced):
    z = torch.rand(1000)
    want = 2 * z + z
    lib.axpy(z, z, 2.0, threads=1000, group_size=64)  # y and x are one tensor
    torch.testing.assert_close(z, want)
    x = torch.rand(128)
    both = torch.cat([x, torch.full((128,), float("nan"))])
    lib.rotate(both[:128], both[128:], threads=128, group_size=64)  # two views of one storage
    assert torch.equal(both[128:], torch.roll(x, 1))
    assert ("rotate", [1]) in fenced or ("rotate", [0, 1]) in fenced


def test_stores_proven_in_bounds_run_unfenced_once_the_facts_are_known(lib, fenced):
    n = 4096
    x = torch.rand(n)
    y = torch.full((n,), float("nan"))
    assert lib.copy._load_store_facts()["written"] == [1]
    lib.copy(x, y, threads=n, group_size=256)
    assert torch.equal(x, y) and fenced == []
    y = torch.full((n,), float("nan"))
    assert lib.guarded_copy._load_store_facts()["accesses"]
    lib.guarded_copy(x, y, np.uint32(n), threads=n + 100, group_size=64)  # guard proves the rounded-up grid
    assert torch.equal(x, y) and fenced == []
    # too small an output for the grid: not proven, fenced, and caught
    with pytest.raises(KernelError, match="byte offset 16000 of buffer 1 'y'"):
        lib.copy(x, torch.empty(4000), threads=n, group_size=256)
    assert fenced == [("copy", [1])]


def test_large_dispatches_wait_for_the_facts_and_small_ones_do_not(lib, monkeypatch):
    monkeypatch.setattr(store_guard, "COPY_WITHOUT_FACTS", 1024)
    lib2 = metal_kernel.compile_shader(SRC.replace("kernel void copy(", "kernel void copy2("))
    x = torch.rand(100)
    lib2.copy2(x, torch.empty(100), threads=100, group_size=32)  # 400 bytes: fenced, no facts compiled
    assert lib2.copy2._store_facts is None
    lib2.copy2(torch.rand(1000), torch.empty(1000), threads=1000, group_size=100)
    assert lib2.copy2._store_facts is not None and not lib2.copy2._store_facts.get("writes_unknown")


def test_small_dispatches_load_the_facts_once_copies_add_up_or_they_are_on_disk(lib, monkeypatch):
    monkeypatch.setattr(store_guard, "COPY_WITHOUT_FACTS", 1 << 20)
    monkeypatch.setattr(store_guard, "COPIES_BEFORE_FACTS", 1000)
    src = SRC.replace("kernel void copy(", "kernel void copy3(")
    lib3 = metal_kernel.compile_shader(src)
    x = torch.rand(100)
    lib3.copy3(x, torch.empty(100), threads=100, group_size=32)  # 400 bytes copied
    lib3.copy3(x, torch.empty(100), threads=100, group_size=32)  # 800
    assert lib3.copy3._store_facts is None
    lib3.copy3(x, torch.empty(100), threads=100, group_size=32)  # 1200: worth the compile now
    assert lib3.copy3._store_facts is not None and not lib3.copy3._store_facts.get("writes_unknown")
    # A new library of the same source finds them on disk at its first dispatch.
    again = metal_kernel.compile_shader(src)
    assert again.copy3 is not lib3.copy3 and again.copy3._store_facts is None
    again.copy3(x, torch.empty(100), threads=100, group_size=32)
    assert again.copy3._store_facts is not None


def test_the_guard_can_be_turned_off(lib, fenced, monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_BOUNDS_CHECK", "0")
    n = 100
    x, to = torch.rand(n), torch.randperm(n).int()
    lib.scatter(x, to, torch.empty(n), threads=n, group_size=32)
    assert fenced == []


# Stores whose index is lane / simdgroup arithmetic (`&`, `>>`, `/`, `%` by a
# constant: check/affine.py's bounded values) and simdgroup-matrix stores.
LANES = """#include <metal_stdlib>
using namespace metal;
kernel void by_simdgroup(device float* y, uint lid [[thread_position_in_threadgroup]],
                         uint tg [[threadgroup_position_in_grid]]) {
  y[tg * 128 + (lid >> 5) * 32 + (lid & 31)] = float(lid);
}
kernel void masked(device float* y, uint lid [[thread_position_in_threadgroup]],
                   uint tg [[threadgroup_position_in_grid]]) {
  y[tg * 128 + ((lid * 8) & ~15u) + lid % 8] = 1;
}
kernel void strided(device float* y, constant uint& stride, uint i [[thread_position_in_grid]]) {
  y[(i & 7) * stride] = 1;
}
kernel void tiles(device const float* a, device float* c, constant uint& n,
                  uint2 tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, a + (tg.y * 16 + (sg / 2) * 8) * n + tg.x * 16 + (sg % 2) * 8, n);
  simdgroup_store(m, c + (tg.y * 16 + (sg / 2) * 8) * n + tg.x * 16 + (sg % 2) * 8, n);
}
"""


@pytest.fixture(scope="module")
def lanes():
    return metal_kernel.compile_shader(LANES, source_name="lanes.metal")


def test_lane_and_simdgroup_arithmetic_is_proven_in_bounds(lanes, fenced):
    for k in (lanes.by_simdgroup, lanes.masked):
        assert k.prove_stores()
    y = np.full(512, np.nan, np.float32)
    lanes.by_simdgroup(y, threads=512, group_size=128)
    assert np.array_equal(y, np.tile(np.arange(128, dtype=np.float32), 4))
    z = np.full(512, np.nan, np.float32)
    lanes.masked(z, threads=64, group_size=16)  # lid < 16: (8 * lid) & ~15 is at most 112: 119 with lid % 8
    assert fenced == []
    assert np.count_nonzero(z == 1) == 4 * 16


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_lane_arithmetic_one_element_short_is_not_proven_and_is_caught(lanes, fenced):
    assert lanes.by_simdgroup.prove_stores()
    y = np.full(511, np.nan, np.float32)
    with pytest.raises(KernelError, match=r"kernel 'by_simdgroup': an access out of bounds by thread \[511, 0, 0\]"):
        lanes.by_simdgroup(y, threads=512, group_size=128)
    assert fenced == [("by_simdgroup", [0])]
    assert np.isnan(y).all()


@pytest.mark.parametrize("n", [32, 48])
def test_simdgroup_matrix_stores_are_proven_in_bounds(lanes, fenced, n):
    assert lanes.tiles.prove_stores()
    a = np.arange(n * n, dtype=np.float32).reshape(n, n)
    c = np.full((n, n), np.nan, np.float32)
    lanes.tiles(a, c, np.uint32(n), threadgroups=(n // 16, n // 16), group_size=128)
    assert np.array_equal(c, a)
    assert fenced == []


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_simdgroup_matrix_stores_past_the_end_are_not_proven(lanes, fenced):
    n = 32
    a = np.zeros(n * n, np.float32)
    c = np.full(n * n - 1, np.nan, np.float32)  # the last element is missing
    with pytest.raises(KernelError, match="out of bounds"):
        lanes.tiles(a, c, np.uint32(n), threadgroups=(2, 2), group_size=128)
    assert fenced == [("tiles", [1])]


@pytest.mark.no_metal_check  # out of bounds on purpose
def test_a_remembered_proof_is_not_reused_when_a_scalar_it_read_changed(lanes, fenced):
    assert lanes.strided.prove_stores()
    y = np.zeros(64, np.float32)
    stride = np.array([9], np.uint32)  # (i & 7) * 9 <= 63: proven
    lanes.strided(y, stride, threads=64, group_size=64)
    lanes.strided(y, stride, threads=64, group_size=64)  # the same shape: the remembered proof
    assert fenced == []
    stride[0] = 10  # same geometry, same sizes, same addresses: only the scalar differs; 7 * 10 = 70 > 63
    with pytest.raises(KernelError, match="out of bounds"):
        lanes.strided(y, stride, threads=64, group_size=64)
    assert fenced == [("strided", [0])]
