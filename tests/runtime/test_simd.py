"""simd_* and quad_* functions: 32-wide simdgroups, over the *active* lanes."""

import numpy as np
import pytest
import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

#define LANE_ATTRS uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]

kernel void reductions(device const float* a [[buffer(0)]], device float* out [[buffer(1)]], LANE_ATTRS) {
  float v = a[gid];
  out[6 * gid + 0] = simd_sum(v);
  out[6 * gid + 1] = simd_product(v);
  out[6 * gid + 2] = simd_min(v);
  out[6 * gid + 3] = simd_max(v);
  out[6 * gid + 4] = simd_prefix_inclusive_sum(v);
  out[6 * gid + 5] = simd_prefix_exclusive_sum(v);
}
kernel void int_reductions(device const int* a [[buffer(0)]], device int* out [[buffer(1)]], LANE_ATTRS) {
  int v = a[gid];
  out[5 * gid + 0] = simd_and(v);
  out[5 * gid + 1] = simd_or(v);
  out[5 * gid + 2] = simd_xor(v);
  out[5 * gid + 3] = simd_prefix_inclusive_product(v);
  out[5 * gid + 4] = simd_prefix_exclusive_product(v);
}
// Divergence: the two branches are separate active sets.
kernel void divergent(device const float* a [[buffer(0)]], device float* out [[buffer(1)]], LANE_ATTRS) {
  float v = a[gid];
  if (lane % 3 == 0) {
    out[gid] = simd_sum(v);
  } else {
    out[gid] = -simd_sum(v);
  }
}
// PyTorch's threadgroup_sum pattern: only the first lanes of simdgroup 0 call simd_sum.
kernel void first_lanes_only(device const float* a [[buffer(0)]], device float* out [[buffer(1)]], LANE_ATTRS) {
  if (lane < 5) out[gid] = simd_sum(a[gid]);
}
kernel void shuffles(device const int* a [[buffer(0)]], device int* out [[buffer(1)]], LANE_ATTRS) {
  int v = a[gid];
  out[8 * gid + 0] = simd_shuffle(v, (lane * 7) % 32);
  out[8 * gid + 1] = simd_shuffle_up(v, 3);
  out[8 * gid + 2] = simd_shuffle_down(v, 5);
  out[8 * gid + 3] = simd_shuffle_xor(v, 6);
  out[8 * gid + 4] = simd_broadcast(v, 17);
  out[8 * gid + 5] = simd_shuffle_rotate_down(v, 4);
  out[8 * gid + 6] = simd_shuffle_and_fill_down(v, -1, 4);
  out[8 * gid + 7] = simd_shuffle_and_fill_up(v, -2, 2);
}
kernel void votes(device const int* a [[buffer(0)]], device ulong* out [[buffer(1)]], LANE_ATTRS) {
  bool p = a[gid] > 0;
  out[6 * gid + 0] = static_cast<ulong>(simd_ballot(p));
  out[6 * gid + 1] = simd_any(p);
  out[6 * gid + 2] = simd_all(p);
  out[6 * gid + 3] = simd_is_first();
  out[6 * gid + 4] = simd_broadcast_first(a[gid]);
  out[6 * gid + 5] = static_cast<ulong>(simd_active_threads_mask());
}
kernel void vector_sum(device const float4* a [[buffer(0)]], device float4* out [[buffer(1)]], LANE_ATTRS) {
  out[gid] = simd_sum(a[gid]);
}
kernel void half_sum(device const half* a [[buffer(0)]], device half* out [[buffer(1)]], LANE_ATTRS) {
  out[gid] = simd_max(a[gid]);
}
kernel void simd_barrier(device const int* a [[buffer(0)]], device int* out [[buffer(1)]],
                         uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup int buf[64];
  buf[lid] = a[gid];
  simdgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = buf[sg * 32 + (lane + 1) % 32];
}
kernel void loop_with_simd(device const float* a [[buffer(0)]], device float* out [[buffer(1)]], LANE_ATTRS) {
  // lanes iterate different numbers of times: iteration k involves lanes with lane >= k
  float acc = 0;
  for (uint k = 0; k <= lane % 4; ++k) {
    acc += simd_sum(a[gid] + k);
  }
  out[gid] = acc;
}
kernel void quads(device const int* a [[buffer(0)]], device int* out [[buffer(1)]], LANE_ATTRS) {
  int v = a[gid];
  out[4 * gid + 0] = quad_sum(v);
  out[4 * gid + 1] = quad_shuffle(v, 3);
  out[4 * gid + 2] = quad_shuffle_xor(v, 1);
  out[4 * gid + 3] = static_cast<int>(static_cast<ulong>(quad_ballot(v > 2)));
}
kernel void two_level(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                      uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]],
                      uint sg [[simdgroup_index_in_threadgroup]], uint nsg [[simdgroups_per_threadgroup]],
                      uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float partial[32];
  float s = simd_sum(a[gid]);
  if (lane == 0) partial[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    float t = simd_sum(lane < nsg ? partial[lane] : 0.0f);
    if (lane == 0) out[tg] = t;
  }
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def lanes(t, n=32):
    return t.reshape(-1, n)


def test_reductions_and_prefix_sums_over_a_full_simdgroup(lib, poison):
    a = torch.rand(64) + 0.5
    out = poison(64 * 6)
    lib.reductions(a, out, threads=64, group_size=64)
    r = out.reshape(64, 6)
    for s in range(2):
        g = a[32 * s:32 * (s + 1)]
        rows = r[32 * s:32 * (s + 1)]
        torch.testing.assert_close(rows[:, 0], g.sum().expand(32))
        torch.testing.assert_close(rows[:, 1], g.prod().expand(32), rtol=1e-5, atol=0)
        assert torch.equal(rows[:, 2], g.min().expand(32))
        assert torch.equal(rows[:, 3], g.max().expand(32))
        torch.testing.assert_close(rows[:, 4], g.cumsum(0))
        torch.testing.assert_close(rows[:, 5], g.cumsum(0) - g)


def test_integer_reductions_and_prefix_products(lib):
    a = torch.randint(1, 4, (32,), dtype=torch.int32)
    out = torch.zeros(32 * 5, dtype=torch.int32)
    lib.int_reductions(a, out, threads=32)
    r = out.reshape(32, 5)
    vals = a.tolist()
    and_, or_, xor_ = vals[0], vals[0], vals[0]
    for v in vals[1:]:
        and_ &= v
        or_ |= v
        xor_ ^= v
    assert set(r[:, 0].tolist()) == {and_} and set(r[:, 1].tolist()) == {or_} and set(r[:, 2].tolist()) == {xor_}
    assert r[:, 3].tolist() == np.cumprod(vals).astype(np.int32).tolist()
    assert r[:, 4].tolist() == [1] + np.cumprod(vals)[:-1].astype(np.int32).tolist()


def test_partial_simdgroup_reduces_over_existing_lanes(lib, poison):
    a = torch.rand(40)
    out = poison(40 * 6)
    lib.reductions(a, out, threads=40, group_size=40)  # second simdgroup has 8 lanes
    r = out.reshape(40, 6)
    torch.testing.assert_close(r[32:, 0], a[32:].sum().expand(8))


def test_divergent_branches_are_separate_active_sets(lib, poison):
    a = torch.rand(32)
    out = poison(32)
    lib.divergent(a, out, threads=32)
    idx = torch.arange(32)
    taken = idx % 3 == 0
    torch.testing.assert_close(out[taken], a[taken].sum().expand(int(taken.sum())))
    torch.testing.assert_close(out[~taken], -a[~taken].sum().expand(int((~taken).sum())))


def test_simd_sum_in_an_if_counts_only_the_lanes_inside(lib, poison):
    a = torch.rand(32)
    out = poison(32)
    lib.first_lanes_only(a, out, threads=32)
    torch.testing.assert_close(out[:5], a[:5].sum().expand(5))
    assert torch.isnan(out[5:]).all()


def test_shuffle_family(lib):
    a = torch.arange(100, 132, dtype=torch.int32)
    out = torch.zeros(32 * 8, dtype=torch.int32)
    lib.shuffles(a, out, threads=32)
    r = out.reshape(32, 8)
    v = a.tolist()
    for i in range(32):
        assert r[i, 0] == v[(i * 7) % 32]
        assert r[i, 1] == (v[i - 3] if i >= 3 else v[i])  # out of range: unchanged
        assert r[i, 2] == (v[i + 5] if i + 5 < 32 else v[i])
        assert r[i, 3] == v[i ^ 6]
        assert r[i, 4] == v[17]
        assert r[i, 5] == v[(i + 4) % 32]
        assert r[i, 6] == (v[i + 4] if i + 4 < 32 else -1)
        assert r[i, 7] == (v[i - 2] if i >= 2 else -2)


def test_ballot_any_all_is_first_broadcast_first(lib):
    a = torch.tensor([(-1) ** (i // 5) * (i + 1) for i in range(32)], dtype=torch.int32)
    out = torch.zeros(32 * 6, dtype=torch.int64)
    lib.votes(a, out, threads=32)
    r = out.reshape(32, 6)
    expected_mask = sum(1 << i for i in range(32) if a[i] > 0)
    assert set(r[:, 0].tolist()) == {expected_mask}
    assert set(r[:, 1].tolist()) == {1}
    assert set(r[:, 2].tolist()) == {0}
    assert r[:, 3].tolist() == [1] + [0] * 31
    assert set(r[:, 4].tolist()) == {int(a[0])}
    assert set(r[:, 5].tolist()) == {0xFFFFFFFF}


def test_active_mask_of_a_partial_simdgroup(lib):
    a = torch.ones(7, dtype=torch.int32)
    out = torch.zeros(7 * 6, dtype=torch.int64)
    lib.votes(a, out, threads=7)
    assert set(out.reshape(7, 6)[:, 5].tolist()) == {0x7F}
    assert set(out.reshape(7, 6)[:, 2].tolist()) == {1}  # simd_all over the 7 lanes that exist


def test_simd_sum_of_vectors(lib, poison):
    a = torch.rand(32, 4)
    out = poison((32, 4))
    lib.vector_sum(a, out, threads=32)
    torch.testing.assert_close(out, a.sum(0).expand(32, 4))


def test_simd_max_of_half(lib):
    a = torch.randn(32).half()
    out = torch.zeros(32, dtype=torch.float16)
    lib.half_sum(a, out, threads=32)
    assert torch.equal(out, a.max().expand(32))


def test_simdgroup_barrier_orders_threadgroup_memory_within_a_simdgroup(lib):
    a = torch.arange(64, dtype=torch.int32)
    out = torch.full_like(a, -1)
    lib.simd_barrier(a, out, threads=64, group_size=64)
    assert torch.equal(out, a.reshape(2, 32).roll(-1, 1).flatten())


def test_simd_function_in_a_loop_with_lane_dependent_trip_count(lib, poison):
    a = torch.rand(32)
    out = poison(32)
    lib.loop_with_simd(a, out, threads=32)
    trips = torch.arange(32) % 4 + 1
    expected = torch.zeros(32)
    for i in range(32):
        acc = 0.0
        for k in range(int(trips[i])):
            active = trips > k
            acc += float((a[active] + k).sum())
        expected[i] = acc
    torch.testing.assert_close(out, expected)


def test_quad_functions_operate_on_groups_of_four(lib):
    a = torch.arange(32, dtype=torch.int32) % 5
    out = torch.zeros(32 * 4, dtype=torch.int32)
    lib.quads(a, out, threads=32)
    r = out.reshape(32, 4)
    v = a.tolist()
    for i in range(32):
        q = i - i % 4
        assert r[i, 0] == sum(v[q:q + 4])
        assert r[i, 1] == v[q + 3]
        assert r[i, 2] == v[i ^ 1]
        assert r[i, 3] == sum(1 << k for k in range(4) if v[q + k] > 2)


def test_two_level_simd_reduction_matches_torch(lib, poison):
    a = torch.rand(1024 * 16)
    out = poison(16)
    lib.two_level(a, out, threads=a.numel(), group_size=1024)
    torch.testing.assert_close(out, a.reshape(16, 1024).sum(1), rtol=1e-5, atol=1e-4)
