"""Kernels whose lanes cannot tell each other apart run once per simdgroup
with whole matrices (runtime/simdgroup_uniform.py). They must give the bits
the per-lane execution gives (fibers), and every kernel that can observe its
lane, synchronise, or add atomically must keep the per-lane execution."""

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel.runtime.compiler import workitem_enabled

pytestmark = pytest.mark.skipif(not workitem_enabled(), reason="work-item loops are off")

SOURCE = r"""
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// C = A * B (n x n, n a multiple of 32): 4 simdgroups per 32x32 tile, 2x2
// accumulators each (the benchmark's kernel).
kernel void gemm(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                 device float* C [[buffer(2)]], constant uint& N [[buffer(3)]],
                 uint2 tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]]) {
  const uint row0 = tg.y * 32 + (sg / 2) * 16, col0 = tg.x * 32 + (sg % 2) * 16;
  simdgroup_float8x8 acc[2][2];
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < 2; ++j) acc[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 a[2], b[2];
  for (uint k = 0; k < N; k += 8) {
    for (uint i = 0; i < 2; ++i) simdgroup_load(a[i], A + (row0 + 8 * i) * N + k, N);
    for (uint j = 0; j < 2; ++j) simdgroup_load(b[j], B + k * N + col0 + 8 * j, N);
    for (uint i = 0; i < 2; ++i)
      for (uint j = 0; j < 2; ++j) simdgroup_multiply_accumulate(acc[i][j], a[i], b[j], acc[i][j]);
  }
  for (uint i = 0; i < 2; ++i)
    for (uint j = 0; j < 2; ++j) simdgroup_store(acc[i][j], C + (row0 + 8 * i) * N + col0 + 8 * j, N);
}

// Half operands, a float accumulator; B^T read transposed, the result
// stored transposed; origins instead of pointer arithmetic.
kernel void gemm_half_t(device const half* A [[buffer(0)]], device const half* Bt [[buffer(1)]],
                        device float* Ct [[buffer(2)]], constant uint& K [[buffer(3)]],
                        uint2 tile [[threadgroup_position_in_grid]]) {
  simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_half8x8 a, b;
  for (uint k = 0; k < K; k += 8) {
    simdgroup_load(a, A, K, ulong2(k, tile.y * 8));
    simdgroup_load(b, Bt, K, ulong2(k, tile.x * 8), true);
    simdgroup_multiply_accumulate(acc, a, b, acc);
  }
  simdgroup_store(acc, Ct, 8 * 4, ulong2(tile.y * 8, tile.x * 8), true);
}

// bfloat in and out, simdgroup_multiply (no accumulator), the diagonal
// constructor: D = (A * B) * 2I.
kernel void bfloat_scaled(device const bfloat* A [[buffer(0)]], device const bfloat* B [[buffer(1)]],
                          device bfloat* D [[buffer(2)]], uint sg [[simdgroup_index_in_threadgroup]]) {
  simdgroup_bfloat8x8 a, b, p, d;
  simdgroup_load(a, A + 64 * sg);
  simdgroup_load(b, B);
  simdgroup_multiply(p, a, b);
  simdgroup_bfloat8x8 two(bfloat(2.0f));
  simdgroup_multiply(d, p, two);
  simdgroup_store(d, D + 64 * sg);
}

// Each of these can tell its lanes apart, synchronises, or adds atomically:
// it must run per lane.
kernel void uses_lane(device const float* A [[buffer(0)]], device float* C [[buffer(1)]],
                      uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 a;
  simdgroup_load(a, A);
  simdgroup_multiply(a, a, a);
  simdgroup_store(a, C);
  C[64 + lane] = float(lane);
}
kernel void uses_simd_sum(device const float* A [[buffer(0)]], device float* C [[buffer(1)]]) {
  simdgroup_float8x8 a;
  simdgroup_load(a, A);
  simdgroup_multiply(a, a, a);
  simdgroup_store(a, C);
  C[64] = simd_sum(1.0f);
}
kernel void uses_elements(device const float* A [[buffer(0)]], device float* C [[buffer(1)]]) {
  simdgroup_float8x8 a;
  simdgroup_load(a, A);
  simdgroup_multiply(a, a, a);
  a.thread_elements() *= 2.0f;
  simdgroup_store(a, C);
}
kernel void uses_atomic(device const float* A [[buffer(0)]], device float* C [[buffer(1)]],
                        device atomic_uint* count [[buffer(2)]]) {
  simdgroup_float8x8 a;
  simdgroup_load(a, A);
  simdgroup_multiply(a, a, a);
  simdgroup_store(a, C);
  atomic_fetch_add_explicit(count, 1u, memory_order_relaxed);
}
kernel void uses_barrier(device const float* A [[buffer(0)]], device float* C [[buffer(1)]],
                         uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float t[64];
  simdgroup_float8x8 a;
  simdgroup_load(a, A);
  if (sg == 0) simdgroup_store(a, t);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_load(a, t);
  simdgroup_multiply(a, a, a);
  if (sg == 1) simdgroup_store(a, C);
}
"""

PER_LANE = ["uses_lane", "uses_simd_sum", "uses_elements", "uses_atomic", "uses_barrier"]


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def rand(shape, seed, dtype=np.float32):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


def run_gemm(lib, n=64, group=128):
    A, B = rand((n, n), 1), rand((n, n), 2)
    C = np.full((n, n), np.nan, np.float32)
    lib.gemm(A, B, C, n, threadgroups=[n // 32, n // 32], group_size=[group], arg_casts={3: "int32"})
    return A, B, C


def same(a, b) -> bool:
    """Bit for bit, NaN (never written) included."""
    return np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_lane_uniform_kernels_run_per_simdgroup(lib):
    for name in ("gemm", "gemm_half_t", "bfloat_scaled"):
        k = getattr(lib, name)
        assert k.execution_mode == "workitem-loops", name
        assert k.whole_simdgroup, name


def test_kernels_that_see_their_lanes_run_per_lane(lib):
    for name in PER_LANE:
        assert not getattr(lib, name).whole_simdgroup, name


def test_gemm_matches_numpy_and_fibers_bit_for_bit(lib, fiber_lib):
    A, B, C = run_gemm(lib)
    np.testing.assert_allclose(C, A.astype(np.float64) @ B.astype(np.float64), rtol=1e-5, atol=1e-5)
    _, _, C_fibers = run_gemm(fiber_lib)
    assert same(C, C_fibers)


def test_partial_simdgroups_take_the_per_lane_path(lib, fiber_lib):
    # 48-thread groups: simdgroup 1 has 16 lanes, whose missing partners
    # hold zeros; the whole-simdgroup function must not run for them.
    _, _, C = run_gemm(lib, group=48)
    _, _, C_fibers = run_gemm(fiber_lib, group=48)
    assert same(C, C_fibers)


def test_half_operands_transposed_load_and_store(lib, fiber_lib):
    K, tiles = 24, 4
    A = rand((8 * tiles, K), 3, np.float16)
    Bt = rand((8 * tiles, K), 4, np.float16)
    outs = []
    for lb in (lib, fiber_lib):
        Ct = np.full((8 * tiles, 8 * tiles), np.nan, np.float32)
        lb.gemm_half_t(A, Bt, Ct, K, threadgroups=[tiles, tiles], group_size=[32], arg_casts={3: "int32"})
        outs.append(Ct)
    want = (A.astype(np.float64) @ Bt.astype(np.float64).T).T
    np.testing.assert_allclose(outs[0], want, rtol=1e-3, atol=1e-3)
    assert same(outs[0], outs[1])


def test_bfloat_multiply_and_diagonal(lib, fiber_lib):
    A = torch.tensor(rand((2 * 64,), 5)).to(torch.bfloat16)
    B = torch.tensor(rand((64,), 6)).to(torch.bfloat16)
    outs = []
    for lb in (lib, fiber_lib):
        D = torch.full((2 * 64,), float("nan"), dtype=torch.bfloat16)
        lb.bfloat_scaled(A, B, D, threads=64, group_size=64)
        outs.append(D)
    want = torch.stack([(A[64 * s:64 * (s + 1)].float().view(8, 8) @ B.float().view(8, 8))
                        .to(torch.bfloat16).float() * 2 for s in range(2)]).flatten()
    torch.testing.assert_close(outs[0].float(), want, rtol=1e-2, atol=1e-2)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))


def test_per_lane_kernels_compute_what_fibers_compute(lib, fiber_lib):
    A = rand((64,), 7)
    for name in PER_LANE:
        outs = []
        for lb in (lib, fiber_lib):
            C = np.full(96, np.nan, np.float32)
            args = [A, C] + ([np.zeros(1, np.uint32)] if name == "uses_atomic" else [])
            getattr(lb, name)(*args, threads=64, group_size=64)
            outs.append((C, args[2] if name == "uses_atomic" else None))
        (c0, n0), (c1, n1) = outs
        assert same(c0, c1), name
        if name == "uses_atomic":
            assert n0[0] == n1[0] == 64  # every lane added


@pytest.mark.parametrize("lines, ok", [
    (["%a = lshr i32 %lin, 5"], True),
    (["%a = udiv exact i32 %lin, 32", "%b = mul i32 %a, 7"], True),
    (["%a = shl i32 %lin, 1", "%b = and i32 %a, -64", "%c = add i32 %b, 3"], True),  # (lin / 32) * 64
    (["%a = zext nneg i32 %lin to i64", "%b = lshr i64 %a, 6", "%c = trunc i64 %b to i32"], True),
    (["%a = and i32 %lin, 31"], False),  # the lane
    (["%a = lshr i32 %lin, 4"], False),  # half a simdgroup
    (["%a = shl i32 %lin, 1", "%b = and i32 %a, -32"], False),  # keeps lin's bit 4
    (["%a = add i32 %lin, 1", "%b = lshr i32 %a, 5"], False),  # not followed through arithmetic
    (["%a = icmp eq i32 %lin, 0"], False),
])
def test_thread_index_analysis(lines, ok):
    from metal_kernel.runtime.simdgroup_uniform import _lane_bits_only_via_simdgroup

    last = lines[-1].split(" = ")[0]
    body = ["define void @f(i32 %lin) {", *[f"  {ln}" for ln in lines], f"  store i32 {last}, ptr %p", "}"]
    assert _lane_bits_only_via_simdgroup(body, "lin") is ok


def test_avx2_build_runs_whole_simdgroups(build_for_avx2, fiber_lib):
    # With 16 vector registers the matrices are kept in memory (an empty
    # asm statement takes their address); the kernel still qualifies.
    build_for_avx2()
    lib = metal_kernel.compile_shader(SOURCE)
    assert lib.gemm.whole_simdgroup
    _, _, C = run_gemm(lib)
    _, _, C_fibers = run_gemm(fiber_lib)
    assert same(C, C_fibers)


def test_only_non_empty_inline_assembly_disqualifies():
    from metal_kernel.runtime.simdgroup_uniform import _INLINE_ASM

    assert not _INLINE_ASM.search('call void asm sideeffect "", "r,~{dirflag}"(ptr %5)')
    assert _INLINE_ASM.search('call void asm sideeffect "pause", ""()')
    assert _INLINE_ASM.search('%3 = call i32 asm "bswap $0", "=r,0"(i32 %2)')
