"""simdgroup_matrix<T, 8, 8>: Apple's lane layout, loads, stores, multiply."""

import pytest
import torch

import metal_kernel

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
    assert lib.layout.execution_mode == "direct-tracked"
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
