"""Lambdas in device code (Metal has none, MSL 3.x §1.5.4): each becomes a
local struct whose members are the captures and whose operator() is the
body (lambdas.py); every kernel here is checked against the original."""

from __future__ import annotations

import numpy as np
import pytest

from metal_kernel.port import port_cuda

from .conftest import poisoned

CUDA = r"""
template <class F>
__device__ float apply_twice(F f, float x) {
    return f(f(x));
}

__device__ float lane_bias() { return 0.25f * (threadIdx.x % 4); }

// [&]: arrays, a device pointer and a constant scalar by reference; called locally.
__global__ void by_ref(float* out, const float* x, int n, float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float acc[4] = {};
    const float* row = x + i;
    auto step = [&](int k) {
        float v = row[0] * scale;
        acc[k % 4] += v + k;
    };
    for (int k = 0; k < 8; ++k) step(k);
    out[i] = acc[0] + acc[1] + acc[2] + acc[3];
}

// [=], explicit captures, a trailing return type, a lambda passed to a template,
// and one that uses threadIdx directly and through a helper.
__global__ void by_value(float* out, const float* x, int n, float scale) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float bias = 0.5f;
    auto f = [=](float v) { return v * scale + bias; };
    auto g = [scale, &bias](float v) -> float { bias += 1.0f; return v - scale * bias; };
    float y = apply_twice(f, x[i]);
    out[i] = y + g(x[i]) + bias + apply_twice([&](float v) { return v + threadIdx.x + lane_bias(); }, 1.0f);
}

// Shared memory used in a lambda; a mutable one; a nested one; a reference parameter.
__global__ void staged(float* out, const float* x, int n) {
    __shared__ float tile[64];
    int t = threadIdx.x;
    auto load = [&](int k) { tile[k] = x[blockIdx.x * 64 + k]; };
    load(t);
    __syncthreads();
    int count = 0;
    auto bump = [count](float& v) mutable { count += 1; v += count; return count; };
    float v = tile[63 - t];
    bump(v);
    bump(v);
    auto outer = [&](int k) {
        auto inner = [&]() { return tile[k] + v; };
        return inner() * 2.0f;
    };
    out[blockIdx.x * 64 + t] = outer(t);
}
"""

UNLOWERABLE = r"""
__global__ void generic(float* out, const float* x) {
    auto f = [](auto v) { return v * 2; };
    out[threadIdx.x] = f(x[threadIdx.x]);
}
__global__ void pointer_param(float* out, const float* x) {
    auto f = [](const float* p) { return p[0]; };
    out[threadIdx.x] = f(x + threadIdx.x);
}
"""


@pytest.fixture(scope="module")
def lambda_port():
    return port_cuda(CUDA, filename="lambdas.cu")


def test_lambdas_become_local_structs(lambda_port):
    m = lambda_port.metal
    assert "struct mk_lambda_1 { thread decltype(row)& row; decltype(scale) scale; thread decltype(acc)& acc; " \
           "auto operator()(int k) const {" in m
    assert "auto step = mk_lambda_1{row, scale, acc};" in m
    assert "auto operator()(float v) const -> float" in m
    assert "threadgroup decltype(tile)& tile" in m
    assert "auto operator()(thread float& v) {" in m  # mutable: no const
    assert "= [" not in m and "apply_twice([" not in m
    assert not [d for d in lambda_port.diagnostics if d.code == "MK1017"]
    assert all(k.translated for k in lambda_port.kernels), lambda_port.report()


@pytest.mark.parametrize("name", ["by_ref", "by_value", "staged"])
def test_lambda_kernels_verify(lambda_port, name):
    x = np.linspace(-1, 1, 128).astype(np.float32)
    if name == "staged":
        res = lambda_port.verify(name, poisoned(128), x, 128, grid=2, block=64)
    else:
        res = lambda_port.verify(name, poisoned(128), x, 100, 1.5, grid=2, block=64)
    assert res.ok, str(res)


def test_unlowerable_lambdas_keep_mk1017_with_the_reason():
    p = port_cuda(UNLOWERABLE, filename="unlowerable.cu")
    msgs = {d.function: d.message for d in p.diagnostics if d.code == "MK1017"}
    assert "generic lambda" in msgs["generic"]
    assert "pointer parameter" in msgs["pointer_param"]
    assert not any(k.translated for k in p.kernels)
