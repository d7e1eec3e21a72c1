"""Kernels written the way ggml and MLX write theirs."""

import numpy as np
import pytest
import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

#define QK4_0 32
typedef struct {
  half d;                 // delta
  uint8_t qs[QK4_0 / 2];  // nibbles / quants
} block_q4_0;

// ggml style: buffers by parameter order, raw bytes cast to the block type.
kernel void kernel_dequant_q4_0(device const char* src, device float* dst,
                                uint tgpig [[threadgroup_position_in_grid]],
                                uint tiisg [[thread_index_in_simdgroup]]) {
  device const block_q4_0* blocks = (device const block_q4_0*)src;
  const block_q4_0 b = blocks[tgpig];
  const float d = b.d;
  const uint j = tiisg % 16;
  const uint8_t q = b.qs[j];
  const float v = tiisg < 16 ? float(int(q & 0x0F) - 8) : float(int(q >> 4) - 8);
  dst[tgpig * QK4_0 + tiisg] = v * d;
}

// Softmax over rows, a threadgroup per row, simd reductions + threadgroup memory.
template <typename T>
kernel void softmax(device const T* x [[buffer(0)]], device T* y [[buffer(1)]],
                    constant int& n [[buffer(2)]],
                    uint row [[threadgroup_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                    uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]],
                    uint tg_size [[threads_per_threadgroup]]) {
  threadgroup float shared[32];
  device const T* in = x + row * n;
  float m = -INFINITY;
  for (int i = lid; i < n; i += tg_size) m = max(m, float(in[i]));
  m = simd_max(m);
  if (lane == 0) shared[sg] = m;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  m = shared[0];
  for (uint k = 1; k < (tg_size + 31) / 32; ++k) m = max(m, shared[k]);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0;
  for (int i = lid; i < n; i += tg_size) s += exp(float(in[i]) - m);
  s = simd_sum(s);
  if (lane == 0) shared[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  s = 0;
  for (uint k = 0; k < (tg_size + 31) / 32; ++k) s += shared[k];
  for (int i = lid; i < n; i += tg_size) y[row * n + i] = T(exp(float(in[i]) - m) / s);
}
template [[host_name("softmax_float")]] kernel void softmax<float>(device const float*, device float*, constant int&, uint, uint, uint, uint, uint);
template [[host_name("softmax_half")]] kernel void softmax<half>(device const half*, device half*, constant int&, uint, uint, uint, uint, uint);

// Matrix types and their operators.
kernel void matrices(device float4* out [[buffer(0)]], device const float4x4* m [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  float4x4 a = m[0];
  float4 v = float4(1, 2, 3, 4);
  out[0] = a * v;              // matrix * column vector
  out[1] = (a * a)[2];         // column 2 of the product
  out[2] = transpose(a)[1];    // row 1 of a
  half2x2 h = half2x2(half2(1, 2), half2(3, 4));
  out[3] = float4(float2(h[0]), float2(h[1] * half(2)));
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def test_q4_0_blocks_dequantise_like_a_numpy_reference(lib):
    rng = np.random.default_rng(0)
    nblocks = 64
    block = np.dtype([("d", "<f2"), ("qs", "u1", 16)])
    blocks = np.zeros(nblocks, dtype=block)
    blocks["d"] = rng.standard_normal(nblocks).astype(np.float16)
    blocks["qs"] = rng.integers(0, 256, (nblocks, 16), dtype=np.uint8)
    raw = np.frombuffer(blocks.tobytes(), dtype=np.uint8)
    assert raw.size == nblocks * 18  # sizeof(block_q4_0) is 18, as in ggml
    out = np.full(nblocks * 32, np.nan, np.float32)
    lib.kernel_dequant_q4_0(raw, out, threadgroups=nblocks, group_size=32)
    lo = (blocks["qs"] & 0x0F).astype(np.int32) - 8
    hi = (blocks["qs"] >> 4).astype(np.int32) - 8
    ref = np.concatenate([lo, hi], axis=1) * blocks["d"].astype(np.float32)[:, None]
    np.testing.assert_array_equal(out.reshape(nblocks, 32), ref.astype(np.float32))


@pytest.mark.parametrize("name,dtype,tol", [("softmax_float", torch.float32, 1e-6),
                                            ("softmax_half", torch.float16, 1e-3)])
def test_softmax_with_simd_reductions(lib, name, dtype, tol):
    x = (torch.randn(7, 300) * 3).to(dtype)
    y = torch.full_like(x, float("nan"))
    getattr(lib, name)(x, y, 300, arg_casts={2: "int32"}, threadgroups=7, group_size=128)
    torch.testing.assert_close(y, x.float().softmax(-1).to(dtype), rtol=tol, atol=tol)


def test_matrix_types_and_operators(lib):
    m = torch.randn(4, 4)  # Metal matrices are column-major: m[c] is column c
    out = torch.full((4, 4), float("nan"))
    lib.matrices(out, m, threads=1)
    A = m.t()  # as a math matrix, rows x columns
    v = torch.tensor([1.0, 2, 3, 4])
    torch.testing.assert_close(out[0], A @ v)
    torch.testing.assert_close(out[1], (A @ A)[:, 2])
    torch.testing.assert_close(out[2], A[1, :])
    assert out[3].tolist() == [1, 2, 6, 8]
