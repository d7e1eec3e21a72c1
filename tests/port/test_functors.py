"""Device functions passed as function-pointer template arguments (Metal has
no function pointers: each becomes a functor type). A function that uses the
thread's indices gets them through the functor: the call through the
template parameter passes the builtins any such function needs, each
functor forwards its own (facts.functor_builtins, emit.functor)."""

from __future__ import annotations

import numpy as np

from metal_kernel.port import port_cuda

from .conftest import poisoned

CUDA = r"""
using step_fn = void (*)(float* out, const float* x, int n);

__device__ void by_thread(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
__device__ void by_lane(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = x[i] + (float)(threadIdx.x % 32);
}
__device__ void pure(float* out, const float* x, int n) {
    if (n > 0) out[0] = x[0];
}
__device__ void staged(float* out, const float* x, int n) {
    __shared__ float tile[64];
    tile[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x < n) out[threadIdx.x] = tile[63 - threadIdx.x];
}

template <step_fn step>
__global__ void apply(float* out, const float* x, int n) {
    step(out, x, n);
}

template __global__ void apply<&by_thread>(float* out, const float* x, int n);
template __global__ void apply<&by_lane>(float* out, const float* x, int n);
template __global__ void apply<&pure>(float* out, const float* x, int n);
template __global__ void apply<&staged>(float* out, const float* x, int n);
"""


def test_functor_passes_the_thread_indices():
    p = port_cuda(CUDA, filename="functors.cu")
    m = p.metal
    assert "step{}(threadIdx, blockIdx, blockDim, out, x, n);" in m
    assert "auto operator()(uint3 threadIdx, uint3 blockIdx, uint3 blockDim, A... a) const " \
           "{ return by_thread(threadIdx, blockIdx, blockDim, a...); }" in m
    assert "{ return pure(a...); }" in m  # forwards only what it needs
    ok = {k.spelling: k.translated for k in p.kernels}
    assert ok == {"apply<&by_thread>": True, "apply<&by_lane>": True, "apply<&pure>": True, "apply<&staged>": False}
    p.load()
    x = np.linspace(-1, 1, 200).astype(np.float32)
    for name in ("apply<&by_thread>", "apply<&by_lane>"):
        res = p.verify(name, poisoned(200), x, 200, grid=4, block=64)
        assert res.ok, str(res)
    res = p.verify("apply<&pure>", np.zeros(200, np.float32), x, 200, grid=1, block=1)
    assert res.ok, str(res)


def test_functor_needing_shared_memory_is_left_out():
    # The kernel template cannot declare the __shared__ array of a function it
    # only knows as a template argument: that instantiation is MK1024, the
    # others are unaffected.
    p = port_cuda(CUDA, filename="functors.cu")
    staged = next(k for k in p.kernels if k.spelling == "apply<&staged>")
    assert not staged.translated and [d.code for d in staged.diagnostics] == ["MK1024"]
    assert "'staged' is passed as a template argument" in staged.diagnostics[0].message
