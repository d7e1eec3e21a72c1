"""simdgroup_matrix<T, 8, 8>: Apple's lane layout, loads, stores, multiply."""

import pytest
import torch

import metal_kernel
from metal_kernel.runtime.compiler import workitem_enabled

SOURCE = r"""
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// Which element of the 8x8 matrix each lane holds: thread_elements() after a load.
kernel void layout(device const float* src [[buffer(0)]], device float2* out [[buffer(1)]],
                   uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m;
  simdgroup_load(m, src, 8);
  out[lane] = m.thread_elements();
}
// Writing thread_elements() directly (as MLX and PyTorch do), then storing.
kernel void from_lanes(device float* dst [[buffer(0)]], uint lane [[thread_index_in_simdgroup]]) {
  simdgroup_float8x8 m = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  m.thread_elements()[0] = float(lane * 2);
  m.thread_elements()[1] = float(lane * 2 + 1);
  simdgroup_store(m, dst, 8);
}
// C = A (M x K) * B (K x N), one simdgroup per 8x8 tile of C, row-major.
// With TRANSPOSE_B, B is given as N x K and loaded transposed.
template <typename T, bool TRANSPOSE_B>
kernel void gemm(device const T* A [[buffer(0)]], device const T* B [[buffer(1)]],
                 device T* C [[buffer(2)]], constant uint3& mnk [[buffer(3)]],
                 uint2 tile [[threadgroup_position_in_grid]]) {
  const uint M = mnk.x, N = mnk.y, K = mnk.z;
  simdgroup_matrix<float, 8, 8> acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_matrix<T, 8, 8> a, b;
  for (uint k = 0; k < K; k += 8) {
    simdgroup_load(a, A, K, ulong2(k, tile.y * 8));
    if (TRANSPOSE_B) {
      simdgroup_load(b, B, K, ulong2(k, tile.x * 8), true);
    } else {
      simdgroup_load(b, B, N, ulong2(tile.x * 8, k));
    }
    simdgroup_multiply_accumulate(acc, a, b, acc);
  }
  simdgroup_matrix<T, 8, 8> out;
  out.thread_elements() = vec<T, 2>(acc.thread_elements());
  simdgroup_store(out, C, N, ulong2(tile.x * 8, tile.y * 8));
  (void)M;
}
template [[host_name("gemm_float")]] kernel void gemm<float, false>(device const float*, device const float*, device float*, constant uint3&, uint2);
template [[host_name("gemm_float_bt")]] kernel void gemm<float, true>(device const float*, device const float*, device float*, constant uint3&, uint2);
template [[host_name("gemm_half")]] kernel void gemm<half, false>(device const half*, device const half*, device half*, constant uint3&, uint2);
template [[host_name("gemm_bfloat")]] kernel void gemm<bfloat, false>(device const bfloat*, device const bfloat*, device bfloat*, constant uint3&, uint2);

// Tiles staged in threadgroup memory, multiply without accumulate.
kernel void tg_multiply(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                        device float* C [[buffer(2)]], uint lid [[thread_index_in_threadgroup]]) {
  threadgroup float As[64], Bs[64];
  for (uint i = lid; i < 64; i += 32) { As[i] = A[i]; Bs[i] = B[i]; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  simdgroup_float8x8 a, b, c;
  simdgroup_load(a, As);
  simdgroup_load(b, Bs);
  simdgroup_multiply(c, a, b);
  simdgroup_store(c, C);
}
// Several simdgroups per threadgroup, one 8x8 tile of C each: simdgroup_multiply
// first, then multiply-accumulate (work-item loops resolve all the group's
// simdgroups in one call). Whole simdgroups past the last tile return. With
// WIDE, a simd_sum over a float4 makes the kernel's operand rows wider (the
// product then reads them at a stride known only at run time); its result
// goes to S.
template <bool WIDE>
kernel void gemm_tiles(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                       device float* C [[buffer(2)]], constant uint3& mnk [[buffer(3)]],
                       device float* S [[buffer(4)]],
                       uint tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]],
                       uint nsg [[simdgroups_per_threadgroup]], uint lane [[thread_index_in_simdgroup]]) {
  const uint M = mnk.x, N = mnk.y, K = mnk.z;
  const uint tile = tg * nsg + sg;
  if (tile >= (M / 8) * (N / 8)) return;
  const uint ty = tile / (N / 8), tx = tile % (N / 8);
  simdgroup_float8x8 a, b, acc;
  simdgroup_load(a, A, K, ulong2(0, ty * 8));
  simdgroup_load(b, B, N, ulong2(tx * 8, 0));
  simdgroup_multiply(acc, a, b);
  for (uint k = 8; k < K; k += 8) {
    simdgroup_load(a, A, K, ulong2(k, ty * 8));
    simdgroup_load(b, B, N, ulong2(tx * 8, k));
    simdgroup_multiply_accumulate(acc, a, b, acc);
  }
  simdgroup_store(acc, C, N, ulong2(tx * 8, ty * 8));
  if (WIDE) {
    const float4 s = simd_sum(float4(acc.thread_elements(), 1.0f, float(lane)));
    if (lane == 0) S[tile] = s.x + s.y + s.z + s.w;
  }
}
template [[host_name("gemm_tiles")]] kernel void gemm_tiles<false>(device const float*, device const float*, device float*, constant uint3&, device float*, uint, uint, uint, uint);
template [[host_name("gemm_tiles_wide")]] kernel void gemm_tiles<true>(device const float*, device const float*, device float*, constant uint3&, device float*, uint, uint, uint, uint);

// A partial simdgroup (threadgroups of 48 threads): its missing lanes hold
// zeros in the product.
kernel void partial_multiply(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                             device float* C [[buffer(2)]], uint tg [[threadgroup_position_in_grid]],
                             uint sg [[simdgroup_index_in_threadgroup]]) {
  simdgroup_float8x8 a, b, c, d;
  simdgroup_load(a, A + 64 * (2 * tg + sg));
  simdgroup_load(b, B);
  simdgroup_load(c, B + 64);
  simdgroup_multiply_accumulate(d, a, b, c);
  simdgroup_store(d, C + 64 * (2 * tg + sg));
}

kernel void diagonal(device float* dst [[buffer(0)]]) {
  simdgroup_float8x8 d(2.5f);
  simdgroup_store(d, dst, 8);
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def lane_coords(lane):
    r = 4 * (lane >= 16) + ((lane >> 1) & 3)
    c = 4 * ((lane >> 3) & 1) + 2 * (lane & 1)
    return r, c


def test_thread_elements_follow_apple_lane_layout(lib):
    # No synchronisation, but loads ask which lane runs: the tracked loop.
    assert lib.layout.execution_mode == ("direct-tracked" if workitem_enabled() else "fibers")
    src = torch.arange(64, dtype=torch.float32)
    out = torch.full((32, 2), float("nan"))
    lib.layout(src, out, threads=32)
    for lane in range(32):
        r, c = lane_coords(lane)
        assert out[lane].tolist() == [8 * r + c, 8 * r + c + 1]


def test_writing_thread_elements_then_storing(lib):
    dst = torch.full((64,), float("nan"))
    lib.from_lanes(dst, threads=32)
    m = dst.reshape(8, 8)
    for lane in range(32):
        r, c = lane_coords(lane)
        assert m[r, c] == 2 * lane and m[r, c + 1] == 2 * lane + 1


@pytest.mark.parametrize("name,dtype,tol", [
    ("gemm_float", torch.float32, dict(rtol=1e-5, atol=1e-5)),
    ("gemm_half", torch.float16, dict(rtol=1e-2, atol=1e-2)),
    ("gemm_bfloat", torch.bfloat16, dict(rtol=5e-2, atol=5e-2)),
])
def test_gemm_on_simdgroup_matrices_matches_torch_matmul(lib, name, dtype, tol):
    M, N, K = 24, 32, 40
    A = torch.randn(M, K).to(dtype)
    B = torch.randn(K, N).to(dtype)
    C = torch.full((M, N), float("nan"), dtype=dtype)
    getattr(lib, name)(A, B, C, [M, N, K, 0], arg_casts={3: "int32"},
                       threadgroups=[N // 8, M // 8], group_size=32)
    torch.testing.assert_close(C, (A.float() @ B.float()).to(dtype), **tol)


def test_gemm_with_transposed_load(lib):
    M, N, K = 16, 24, 32
    A = torch.randn(M, K)
    Bt = torch.randn(N, K)
    C = torch.full((M, N), float("nan"))
    lib.gemm_float_bt(A, Bt, C, [M, N, K, 0], arg_casts={3: "int32"},
                      threadgroups=[N // 8, M // 8], group_size=32)
    torch.testing.assert_close(C, A @ Bt.t(), rtol=1e-5, atol=1e-5)


def test_multiply_from_threadgroup_memory(lib):
    A, B = torch.randn(8, 8), torch.randn(8, 8)
    C = torch.full((8, 8), float("nan"))
    lib.tg_multiply(A, B, C, threads=32)
    torch.testing.assert_close(C, A @ B, rtol=1e-5, atol=1e-5)


def test_scalar_constructor_is_diagonal(lib):
    dst = torch.full((64,), float("nan"))
    lib.diagonal(dst, threads=32)
    assert torch.equal(dst.reshape(8, 8), torch.eye(8) * 2.5)


def _tiles(M, N):
    return (M // 8) * (N // 8)


@pytest.mark.parametrize("name", ["gemm_tiles", "gemm_tiles_wide"])
@pytest.mark.parametrize("sgs", [1, 3, 4])
def test_several_simdgroups_per_group_match_fibers_bit_for_bit(lib, fiber_lib, name, sgs):
    torch.manual_seed(sgs)
    M, N, K = 40, 32, 48
    A, B = torch.randn(M, K), torch.randn(K, N)
    tiles = _tiles(M, N)
    groups = (tiles + sgs - 1) // sgs  # the last group has simdgroups past the last tile
    outs = []
    for l in (lib, fiber_lib):
        C, S = torch.full((M, N), float("nan")), torch.full((tiles,), float("nan"))
        getattr(l, name)(A, B, C, [M, N, K, 0], S, arg_casts={3: "int32"},
                         threadgroups=groups, group_size=32 * sgs)
        torch.testing.assert_close(C, A @ B, rtol=1e-4, atol=1e-4)
        if name == "gemm_tiles_wide":
            # per tile: the sum of C's 64 elements, 32 ones and lanes 0..31
            want = (A @ B).reshape(M // 8, 8, N // 8, 8).sum((1, 3)).reshape(-1) + 32 + 496
            torch.testing.assert_close(S, want, rtol=1e-4, atol=1e-3)
        outs.append((C, S))
    assert torch.equal(outs[0][0], outs[1][0])
    if name == "gemm_tiles_wide":
        assert torch.equal(outs[0][1], outs[1][1])


def test_partial_simdgroup_multiply(lib, fiber_lib):
    torch.manual_seed(7)
    groups = 3
    A, B = torch.randn(2 * groups, 8, 8), torch.randn(2, 8, 8)
    outs = []
    for l in (lib, fiber_lib):
        C = torch.full((2 * groups, 8, 8), float("nan"))
        l.partial_multiply(A, B, C, threadgroups=groups, group_size=48)
        outs.append(C)
    # Full simdgroups: A @ B + C. The 16-lane ones: only lanes 0..15 exist
    # (rows 0..3 of the layout, see lane_coords); the others' elements are 0.
    full = A[0::2] @ B[0] + B[1]
    torch.testing.assert_close(outs[0][0::2], full, rtol=1e-5, atol=1e-5)
    present = torch.zeros(8, 8, dtype=torch.bool)
    for lane in range(16):
        r, c = lane_coords(lane)
        present[r, c:c + 2] = True
    Ap = torch.where(present, A[1::2], torch.zeros(()))
    Bp = torch.where(present, B[0], torch.zeros(()))
    Cp = torch.where(present, B[1], torch.zeros(()))
    want = Ap @ Bp + Cp
    got = outs[0][1::2]
    torch.testing.assert_close(got[:, present], want[:, present], rtol=1e-5, atol=1e-5)
    assert torch.isnan(got[:, ~present]).all()  # lanes that do not exist store nothing
    assert torch.equal(outs[0].nan_to_num(123.0), outs[1].nan_to_num(123.0))
