"""Device functions passed as function-pointer template arguments (Metal has
no function pointers: each becomes a functor type). A function that uses the
thread's indices gets them through the functor: the call through the
template parameter passes the builtins any such function needs, each
functor forwards its own (facts.functor_builtins, emit.functor); one with
__shared__ memory declares it as a struct type the kernel allocates and
passes (facts.functor_shared)."""

from __future__ import annotations

import numpy as np

from metal_kernel.port import port_cuda

from .conftest import poisoned

STEP = "using step_fn = void (*)(float* out, const float* x, int n);\n"
APPLY = r"""
template <step_fn step>
__global__ void apply(float* out, const float* x, int n) {
    step(out, x, n);
}
"""


def instantiate(*fns: str) -> str:
    return "".join(f"template __global__ void apply<&{f}>(float* out, const float* x, int n);\n" for f in fns)


CUDA = STEP + r"""
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
""" + APPLY + instantiate("by_thread", "by_lane", "pure", "staged")


def test_functor_passes_the_thread_indices():
    p = port_cuda(CUDA, filename="functors.cu")
    m = p.metal
    assert "step{}(mk_step_shared, threadIdx, blockIdx, blockDim, out, x, n);" in m
    assert "auto operator()(threadgroup mk_shared& mk_tg, uint3 threadIdx, uint3 blockIdx, uint3 blockDim, A... a) " \
           "const { return by_thread(threadIdx, blockIdx, blockDim, a...); }" in m
    assert "{ return pure(a...); }" in m  # forwards only what it needs
    ok = {k.spelling: k.translated for k in p.kernels}
    assert ok == {"apply<&by_thread>": True, "apply<&by_lane>": True, "apply<&pure>": True, "apply<&staged>": True}
    p.load()
    x = np.linspace(-1, 1, 200).astype(np.float32)
    for name in ("apply<&by_thread>", "apply<&by_lane>"):
        res = p.verify(name, poisoned(200), x, 200, grid=4, block=64)
        assert res.ok, str(res)
    res = p.verify("apply<&pure>", np.zeros(200, np.float32), x, 200, grid=1, block=1)
    assert res.ok, str(res)


def test_functor_brings_its_shared_memory():
    # The kernel template cannot name the __shared__ array of a function it
    # only knows as a template argument: the functor declares it as a struct
    # type (mk_shared), the kernel declares one in threadgroup memory and
    # passes it through the call.
    p = port_cuda(CUDA, filename="functors.cu")
    m = p.metal
    assert "struct staged_fn { struct mk_shared { float staged_tile[64]; }; " in m
    assert "threadgroup typename step::mk_shared mk_step_shared;" in m
    assert "{ return staged(mk_tg.staged_tile, threadIdx, a...); }" in m
    x = np.linspace(-1, 1, 64).astype(np.float32)
    res = p.verify("apply<&staged>", poisoned(64), x, 64, grid=1, block=64)
    assert res.ok, str(res)


DYNAMIC = STEP + r"""
__device__ void dynamic(float* out, const float* x, int n) {
    extern __shared__ float buf[];
    buf[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    if (threadIdx.x < n) out[threadIdx.x] = buf[n - 1 - threadIdx.x];
}
""" + APPLY + instantiate("dynamic")


def test_functor_needing_dynamic_shared_memory_is_left_out():
    # The size of dynamic threadgroup memory is the launch's: the kernel
    # template would have to bind it for a function it does not know.
    p = port_cuda(DYNAMIC, filename="dynamic.cu")
    k = p.kernels[0]
    assert not k.translated and [d.code for d in k.diagnostics] == ["MK1024"]
    assert "'dynamic' is passed as a template argument but needs dynamic threadgroup memory" in k.diagnostics[0].message


MIXED = STEP + r"""using unary_fn = float (*)(float);

__device__ float twice(float v) { return 2.0f * v; }

template <unary_fn op>
__device__ float through(float v) { return op(v); }  // a device function calling through its parameter

__device__ void staged(float* out, const float* x, int n) {
    __shared__ float tile[64];
    tile[threadIdx.x] = through<twice>(x[threadIdx.x]);
    __syncthreads();
    if (threadIdx.x < n) out[threadIdx.x] = tile[63 - threadIdx.x];
}
""" + APPLY + instantiate("staged")


def test_functor_shared_memory_beside_a_device_function_calling_through_a_parameter():
    # `through` passes no threadgroup memory: `twice_fn` keeps the overload
    # without it; `staged_fn` is only called by the kernel, which passes its own.
    p = port_cuda(MIXED, filename="mixed.cu")
    assert all(k.translated for k in p.kernels), p.report()
    x = np.linspace(-1, 1, 64).astype(np.float32)
    res = p.verify("apply<&staged>", poisoned(64), x, 64, grid=1, block=64)
    assert res.ok, str(res)
