"""A bad kernel or bad arguments raise one clear error; the process lives on."""

import pytest
import torch

import metal_kernel
from metal_kernel import KernelError


SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void wild_pointer(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  if (i == 5) { device float* p = (device float*)16; *p = 1; }
  x[i] = 1;
}
kernel void past_the_end(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i + 1024] = 1;  // one element past a 4 KiB buffer
}
kernel void int_div(device int* x [[buffer(0)]], constant int& d [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  x[i] = 100 / (d - int(i == 3) * d);
}
kernel void int_min_div(device int* x [[buffer(0)]], constant int& d [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  x[i] = (-2147483647 - 1) / d;
}
kernel void fault_in_barrier_kernel(device float* x [[buffer(0)]], uint lid [[thread_position_in_threadgroup]],
                                    uint gid [[thread_position_in_grid]]) {
  threadgroup float buf[64];
  buf[lid] = 1;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (gid == 77) { device float* p = (device float*)8; x[0] = *p; }
  x[gid] = buf[(lid + 1) % 64];
}
// Not a tail call, and a frame the optimiser cannot drop: ~1 KiB per level.
float recurse(uint depth) {
  volatile float pad[256];
  pad[depth % 256] = depth;
  if (depth > 100000000u) return pad[0];
  return recurse(depth + 1) + pad[depth % 256];
}
kernel void stack_overflow(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = recurse(i);
}
kernel void fine(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = i; }
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_wild_pointer_names_kernel_thread_and_address(lib):
    with pytest.raises(KernelError) as info:
        lib.wild_pointer(torch.zeros(10))
    e = info.value
    assert "kernel 'wild_pointer'" in str(e) and "invalid memory access" in str(e)
    assert e.thread == [5, 0, 0] and e.address == 16


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_write_past_a_buffer_names_the_buffer(lib, monkeypatch):
    # A buffer that ends right before an inaccessible page, so the stray
    # write faults instead of landing in someone else's memory; the runtime's
    # own fences (test_store_guard.py) are off, so the fault handler's naming
    # of the nearest buffer is what is under test.
    monkeypatch.setenv("METAL_KERNEL_BOUNDS_CHECK", "0")
    import ctypes
    import mmap

    import numpy as np

    page = mmap.PAGESIZE
    region = mmap.mmap(-1, 2 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(region))
    libc = ctypes.CDLL(None)
    assert libc.mprotect(ctypes.c_void_p(base + page), page, 0) == 0
    x = np.frombuffer(region, dtype=np.float32, count=page // 4)
    try:
        with pytest.raises(KernelError, match=r"kernel 'past_the_end'.*0 bytes past the end of buffer 0 'x'"):
            lib.past_the_end(x, threads=1)
    finally:
        libc.mprotect(ctypes.c_void_p(base + page), page, 3)
        del x


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_integer_division_by_zero_is_reported_not_a_crash(lib):
    with pytest.raises(KernelError, match=r"kernel 'int_div': integer division by zero.*thread \[3, 0, 0\]"):
        lib.int_div(torch.zeros(8, dtype=torch.int32), 1, arg_casts={1: "int32"})


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_int_min_divided_by_minus_one_is_reported(lib):
    with pytest.raises(KernelError, match="INT_MIN / -1"):
        lib.int_min_div(torch.zeros(1, dtype=torch.int32), -1, arg_casts={1: "int32"})


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_fault_after_a_barrier_on_fibers(lib):
    with pytest.raises(KernelError, match=r"thread \[77, 0, 0\] \(threadgroup \[1, 0, 0\]\)"):
        lib.fault_in_barrier_kernel(torch.zeros(128), threads=128, group_size=64)


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_stack_overflow_is_reported(lib):
    with pytest.raises(KernelError, match="kernel 'stack_overflow'"):
        lib.stack_overflow(torch.zeros(1), threads=1)


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_library_keeps_working_after_every_fault(lib):
    for bad in (lambda: lib.wild_pointer(torch.zeros(10)),
                lambda: lib.int_div(torch.zeros(8, dtype=torch.int32), 1, arg_casts={1: "int32"})):
        with pytest.raises(KernelError):
            bad()
        x = torch.full((300,), float("nan"))
        lib.fine(x)
        assert torch.equal(x, torch.arange(300, dtype=torch.float32))


def test_unsupported_argument_type(lib):
    with pytest.raises(TypeError, match="argument 0 has type dict"):
        lib.fine({})


def test_meta_tensor_is_rejected(lib):
    with pytest.raises(TypeError, match="on meta"):
        lib.fine(torch.empty(4, device="meta"))


@pytest.mark.no_metal_check  # faults on purpose (the runtime's own fault handling is under test)
def test_a_call_that_faults_in_many_groups_names_the_lowest_every_time():
    """Groups run on several threads at once; of those that fault, the
    lowest is reported, so the same call gives the same error each time."""
    lib = metal_kernel.compile_shader(r"""
#include <metal_stdlib>
using namespace metal;
kernel void every_group(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]],
                        uint lid [[thread_position_in_threadgroup]]) {
  if (lid == 1) { device float* p = (device float*)16; *p = 1; }
  x[i] = 1;
}
""")
    for _ in range(40):
        with pytest.raises(KernelError, match=r"thread \[1, 0, 0\] \(threadgroup \[0, 0, 0\]\)"):
            lib.every_group(torch.zeros(64 * 32), threads=64 * 32, group_size=32)
