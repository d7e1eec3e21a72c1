"""CUDA's implicit float -> __nv_bfloat16 conversions, explicit in the port
(conversions.py): Metal's bfloat converts from float only explicitly."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda

from .conftest import poisoned

CUDA = r"""
#include <cuda_bf16.h>
typedef __nv_bfloat16 floatX;

template <typename T> struct Pack {
    T v[4];
    __device__ T& operator[](int i) { return v[i]; }
};
typedef Pack<floatX> P4;

__device__ floatX halved(float x) { return x * 0.5f; }

__global__ void to_bf(floatX* out, floatX* out2, float* acc, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float y = x[i] * 3.0f;
    floatX b = y;
    b += x[i];
    P4 p;
    for (int k = 0; k < 4; k++) { p[k] = y + k; }
    out[i] = (float)b + (float)p[i % 4];
    floatX* row = out2;
    row[i] = halved(y);
    {
        float acc = y;
        acc = acc * 2.0f;
        row[i] += acc;
    }
    acc[i] = y;
}

__global__ void copy_bf(floatX* out, const floatX* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { out[i] = in[i]; }
}
"""


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    import torch

    return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)


@pytest.fixture(scope="module")
def conv_port():
    return port_cuda(CUDA, filename="conversions.cu")


def test_float_to_bfloat_is_explicit(conv_port):
    m = conv_port.metal
    assert "floatX b = bfloat(y);" in m  # initialisation
    assert "b += bfloat(x[i]);" in m  # compound assignment
    assert "p[k] = bfloat(y + k);" in m  # Pack<floatX>::operator[] is a bfloat&
    assert "out[i] = bfloat((float)b + (float)p[i % 4]);" in m
    assert "return bfloat(x * 0.5f);" in m
    assert "row[i] += bfloat(acc);" in m  # `floatX* row`: a local pointer
    assert not [k for k in conv_port.kernels if not k.translated]
    conv_port.load()
    x = np.linspace(-2, 2, 96).astype(np.float32)
    res = conv_port.verify("to_bf", np.full(96, 0xA5A5, np.uint16), np.full(96, 0xA5A5, np.uint16),
                           poisoned(96), x, 96, grid=1, block=128)
    assert res.ok, str(res)


def test_no_conversion_where_cuda_makes_none(conv_port):
    m = conv_port.metal
    # The inner `float acc` shadows the parameter: its assignment stays float.
    assert "acc = acc * 2.0f;" in m and "bfloat(acc * 2.0f)" not in m
    assert "acc[i] = y;" in m  # a float buffer
    assert "float y = x[i] * 3.0f;" in m
    assert "out[i] = in[i];" in m  # bfloat to bfloat: nothing to convert
    x = _bf16_bits(np.linspace(-2, 2, 64))
    res = conv_port.verify("copy_bf", np.full(64, 0xA5A5, np.uint16), x, 64, grid=1, block=64)
    assert res.ok, str(res)


def test_metal_rejects_the_implicit_conversion():
    # Why the port spells it: the same assignment without bfloat(...) does not compile.
    import metal_kernel
    from metal_kernel.runtime.errors import MetalCompileError

    head = "#include <metal_stdlib>\nusing namespace metal;\n"
    body = "kernel void k(device bfloat* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {{ o[i] = {}; }}"
    metal_kernel.compile_shader(head + body.format("bfloat(0.5f * float(i))"))
    with pytest.raises(MetalCompileError):
        metal_kernel.compile_shader(head + body.format("0.5f * float(i)"))
