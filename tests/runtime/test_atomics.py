"""Atomics on device and threadgroup memory, with threadgroups on several cores."""

import numpy as np
import pytest
import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
#include <c10/metal/atomic.h>
using namespace metal;

kernel void histogram(device const uint* data [[buffer(0)]], device atomic_uint* bins [[buffer(1)]],
                      constant uint& nbins [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(&bins[data[i] % nbins], 1u, memory_order_relaxed);
}
// Per-group histogram in threadgroup memory, merged into device memory.
kernel void histogram_tg(device const uint* data [[buffer(0)]], device atomic_uint* bins [[buffer(1)]],
                         uint i [[thread_position_in_grid]], uint lid [[thread_index_in_threadgroup]],
                         uint n [[threads_per_threadgroup]]) {
  threadgroup atomic_uint local[16];
  for (uint b = lid; b < 16; b += n) atomic_store_explicit(&local[b], 0u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  atomic_fetch_add_explicit(&local[data[i] % 16], 1u, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint b = lid; b < 16; b += n)
    atomic_fetch_add_explicit(&bins[b], atomic_load_explicit(&local[b], memory_order_relaxed), memory_order_relaxed);
}
kernel void scatter_add(device const float* src [[buffer(0)]], device const int* index [[buffer(1)]],
                        device atomic_float* out [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  atomic_fetch_add_explicit(&out[index[i]], src[i], memory_order_relaxed);
}
kernel void int_ops(device atomic_int* a [[buffer(0)]], device const int* v [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  atomic_fetch_max_explicit(&a[0], v[i], memory_order_relaxed);
  atomic_fetch_min_explicit(&a[1], v[i], memory_order_relaxed);
  atomic_fetch_or_explicit(&a[2], 1 << (i % 31), memory_order_relaxed);
  atomic_fetch_xor_explicit(&a[3], v[i], memory_order_relaxed);
  atomic_fetch_sub_explicit(&a[4], 1, memory_order_relaxed);
  atomic_fetch_and_explicit(&a[5], ~(1 << (i % 31)), memory_order_relaxed);
}
// A counter with compare-exchange: every thread takes a unique ticket.
kernel void tickets(device atomic_uint* counter [[buffer(0)]], device uint* taken [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  uint expected = atomic_load_explicit(counter, memory_order_relaxed);
  while (!atomic_compare_exchange_weak_explicit(counter, &expected, expected + 1,
                                                memory_order_relaxed, memory_order_relaxed)) {}
  taken[expected] = i + 1;
}
kernel void exchange(device atomic_int* a [[buffer(0)]], device int* old [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  old[i] = atomic_exchange_explicit(&a[i], int(i) * 10, memory_order_relaxed);
}
kernel void max_u64(device atomic_ulong* a [[buffer(0)]], device const ulong* v [[buffer(1)]],
                    uint i [[thread_position_in_grid]]) {
  atomic_max_explicit(&a[0], v[i], memory_order_relaxed);
  atomic_min_explicit(&a[1], v[i], memory_order_relaxed);
}
// PyTorch's CAS-emulated half atomics (c10/metal/atomic.h).
kernel void half_index_add(device c10::metal::AtomicType<half>::type* out [[buffer(0)]],
                           device const half* src [[buffer(1)]], device const long* index [[buffer(2)]],
                           uint i [[thread_position_in_grid]]) {
  c10::metal::AtomicType<half>::atomic_add(out, index[i], src[i]);
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def test_histogram_with_device_atomics_over_many_groups(lib):
    data = torch.randint(0, 1000, (200_000,), dtype=torch.int32)
    bins = torch.zeros(37, dtype=torch.int32)
    lib.histogram(data, bins, 37, arg_casts={2: "int32"}, threads=data.numel(), group_size=256)
    assert torch.equal(bins.long(), torch.bincount(data.long() % 37, minlength=37))


def test_histogram_in_threadgroup_memory(lib):
    data = torch.randint(0, 1000, (64 * 500,), dtype=torch.int32)
    bins = torch.zeros(16, dtype=torch.int32)
    lib.histogram_tg(data, bins, threads=data.numel(), group_size=64)
    assert torch.equal(bins.long(), torch.bincount(data.long() % 16, minlength=16))


def test_float_scatter_add_with_atomic_float(lib):
    src = torch.rand(100_000)
    index = torch.randint(0, 50, (100_000,), dtype=torch.int32)
    out = torch.zeros(50)
    lib.scatter_add(src, index, out, threads=src.numel(), group_size=128)
    expected = torch.zeros(50).index_add_(0, index.long(), src)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-3)


def test_integer_fetch_ops(lib):
    v = torch.randint(-1000, 1000, (5000,), dtype=torch.int32)
    a = torch.tensor([-(2**31), 2**31 - 1, 0, 0, 0, -1], dtype=torch.int32)
    lib.int_ops(a, v, threads=v.numel(), group_size=100)
    xor = int(np.bitwise_xor.reduce(v.numpy()))
    assert a.tolist() == [int(v.max()), int(v.min()), 2**31 - 1, xor, -5000, -(2**31)]


@pytest.mark.no_metal_check  # hands out tickets in the order threads arrive: its result depends on the schedule by design
def test_compare_exchange_gives_unique_tickets(lib):
    n = 20_000
    counter = torch.zeros(1, dtype=torch.int32)
    taken = torch.zeros(n, dtype=torch.int32)
    lib.tickets(counter, taken, threads=n, group_size=64)
    assert counter.item() == n
    assert sorted(taken.tolist()) == list(range(1, n + 1))


def test_exchange_returns_the_old_value(lib):
    a = torch.arange(100, 108, dtype=torch.int32)
    old = torch.zeros(8, dtype=torch.int32)
    lib.exchange(a, old, threads=8)
    assert old.tolist() == list(range(100, 108)) and a.tolist() == [10 * i for i in range(8)]


def test_64_bit_min_max(lib):
    v = torch.randint(0, 2**62, (3000,), dtype=torch.int64)
    a = torch.tensor([0, 2**63 - 1], dtype=torch.int64)
    lib.max_u64(a, v, threads=v.numel(), group_size=50)
    assert a.tolist() == [int(v.max()), int(v.min())]


def test_c10_half_atomic_add_emulated_with_cas(lib):
    src = torch.ones(4096, dtype=torch.float16) * 0.5
    index = torch.randint(0, 7, (4096,))
    out = torch.zeros(8, dtype=torch.float16)
    lib.half_index_add(out, src, index, threads=4096, group_size=64)
    expected = torch.zeros(8).index_add_(0, index, src.float())
    torch.testing.assert_close(out.float(), expected, rtol=1e-3, atol=0.5)
