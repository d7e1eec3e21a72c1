"""Vector loads and stores at addresses aligned only to their element type:
Apple GPUs run them (candle/ggml's kernel_mul_mm_f32_f32 stores a float4 at a
float's alignment), so they must not fault here either, in every execution
mode."""

import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
struct Pair { float4 a; int4 b; };

// float4 / int4 / a struct of them read and written one float past a
// 16-byte boundary: 4-byte aligned only.
kernel void shifted_direct(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  device const float4* src = (device const float4*)(in + 1);
  device float4* dst = (device float4*)(out + 1);
  dst[i] = src[i] * 2.0f + 1.0f;
  device Pair* pairs = (device Pair*)(out + 1 + 4 * 64);
  pairs[i].a = src[i];
  pairs[i].b = int4(src[i]);
}
kernel void shifted_barrier(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                            uint i [[thread_position_in_grid]], uint l [[thread_position_in_threadgroup]]) {
  threadgroup float4 tile[32];
  tile[l] = ((device const float4*)(in + 1))[i];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  ((device float4*)(out + 1))[i] = tile[31 - l];
}
kernel void shifted_simd(device float* out [[buffer(0)]], device const float* in [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  float4 v = ((device const float4*)(in + 3))[i];
  ((device float4*)(out + 3))[i] = simd_sum(v);
}
"""

N = 64


def test_vector_accesses_at_element_alignment_do_not_fault():
    lib = metal_kernel.compile_shader(SOURCE)
    x = torch.randn(4 * N + 4)
    v = x[1:1 + 4 * N].view(N, 4)

    out = torch.full((4 * N * 3 + 8,), float("nan"))
    lib.shifted_direct(out, x, threads=N)
    torch.testing.assert_close(out[1:1 + 4 * N].view(N, 4), v * 2 + 1)
    pairs = out[1 + 4 * N: 1 + 4 * N + 8 * N].view(N, 8)
    torch.testing.assert_close(pairs[:, :4], v)
    torch.testing.assert_close(pairs[:, 4:].contiguous().view(torch.int32).float(), v.trunc())

    out = torch.full((4 * N + 4,), float("nan"))
    lib.shifted_barrier(out, x, threads=N, group_size=32)
    got = out[1:1 + 4 * N].view(N // 32, 32, 4)
    torch.testing.assert_close(got, v.view(N // 32, 32, 4).flip(1))

    out = torch.full((4 * N + 4,), float("nan"))
    lib.shifted_simd(out, torch.cat([x, x[:2]]), threads=N, group_size=32)
    w = torch.cat([x, x[:2]])[3:3 + 4 * N].view(N // 32, 32, 4)
    torch.testing.assert_close(out[3:3 + 4 * N].view(N // 32, 32, 4), w.sum(1, keepdim=True).expand(-1, 32, -1),
                               rtol=1e-5, atol=1e-5)
