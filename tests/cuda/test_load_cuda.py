"""load_cuda's interface and its errors: names, argument conversion,
unsupported constructs, faults, timeouts, constants, printf."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from metal_kernel import port

VADD = r"""
#include <cuda_runtime.h>
__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
template <typename T> __global__ void scale_kernel(const T* x, T* y, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}
template <typename T, int N> __global__ void tagged(T* y) { y[threadIdx.x] = T(N); }
void launch(float* x, float* y, int n) {
  scale_kernel<float><<<(n + 127) / 128, 128>>>(x, y, 1.5f, n);
  tagged< unsigned int,4 ><<<1, 32>>>((unsigned int*)y);
}
"""


@pytest.fixture(scope="module")
def lib():
    return port.load_cuda(VADD, filename="vadd.cu")


def test_calling_convention(lib):
    n = 1000
    a = np.random.default_rng(0).random(n, dtype=np.float32)
    b = np.random.default_rng(1).random(n, dtype=np.float32)
    c = np.full(n, np.nan, np.float32)
    lib["vadd"](a, b, c, n, grid=4, block=256, shared_mem=0)
    np.testing.assert_array_equal(c, a + b)
    c[:] = np.nan
    lib.vadd(a, b, c, n, grid=(4, 1, 1), block=(256,))
    np.testing.assert_array_equal(c, a + b)


def test_torch_tensors(lib):
    torch = pytest.importorskip("torch")
    x = torch.arange(300, dtype=torch.float32)
    y = torch.full((300,), float("nan"))
    lib["scale_kernel<float>"](x, y, 1.5, 300, grid=(3, 1, 1), block=(128, 1, 1))
    assert torch.equal(y, x * 1.5)


def test_instantiation_names(lib):
    assert sorted(lib) == ["scale_kernel<float>", "tagged<unsigned int, 4>", "vadd"]
    assert lib["tagged<unsigned int,4>"] is lib["tagged<unsigned int, 4>"]
    with pytest.raises(KeyError, match="scale_kernel<float>"):
        lib["scale_kernel<double>"]


def test_scalar_conversion_errors(lib):
    a = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match=r"argument 3 \('n', 32-bit signed integer\).*does not fit"):
        lib.vadd(a, a, a, 2**31, grid=1, block=4)
    with pytest.raises(TypeError, match="argument 3.*got float"):
        lib.vadd(a, a, a, 4.0, grid=1, block=4)
    with pytest.raises(TypeError, match="takes 4 argument"):
        lib.vadd(a, a, a, grid=1, block=4)
    with pytest.raises(TypeError, match="elements are 8 bytes"):
        lib.vadd(a, a, np.zeros(4, np.float64), 4, grid=1, block=4)
    with pytest.raises(TypeError, match="argument 2 .*pass a tensor"):
        lib.vadd(a, a, 5, 4, grid=1, block=4)


def test_launch_geometry_errors(lib):
    a = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="2048 threads; this kernel allows at most 1024"):
        lib.vadd(a, a, a, 4, grid=1, block=(64, 32))
    with pytest.raises(ValueError, match=r"block.z = 65"):
        lib.vadd(a, a, a, 4, grid=1, block=(1, 1, 65))
    with pytest.raises(ValueError, match="shared_mem"):
        lib.vadd(a, a, a, 4, grid=1, block=4, shared_mem=300_000)


@pytest.mark.parametrize("body, construct", [
    ('asm volatile("membar.gl;");', "inline PTX assembly"),
    ("float v = tex1Dfetch<float>(t, 0);", "texture fetch"),
    ("child<<<1, 1>>>(out);", "dynamic parallelism"),
    ("cooperative_groups::this_grid().sync();", "grid-wide synchronisation"),
    ("out[0] = __shfl(out[0], 0);", "pre-Volta warp function"),
])
def test_unsupported_constructs_are_errors_naming_the_line(body, construct):
    src = ("#include <cooperative_groups.h>\n__global__ void child(float* out) {}\n"
           "__global__ void k(float* out, unsigned long long t) {\n  " + body + "\n}\n")
    with pytest.raises(port.CudaCompileError, match=construct) as e:
        port.load_cuda(src, filename="bad.cu")
    assert e.value.filename == "bad.cu" and e.value.lineno == 4


def test_compile_error_points_at_the_users_line():
    with pytest.raises(port.CudaCompileError) as e:
        port.load_cuda("__global__ void k(int* x) {\n  x[0] = undefined_name;\n}\n", filename="typo.cu")
    assert e.value.lineno == 2 and "undefined_name" in str(e.value)


def test_host_code_is_not_compiled():
    # Host code may use anything (cuBLAS, files): it is dropped, never run.
    src = r"""
#include <cublas_v2.h>
#include <stdio.h>
cublasHandle_t handle;
static int host_counter = 0;
__global__ void k(int* x) { x[threadIdx.x] = 2 * threadIdx.x; }
int main(int argc, char** argv) {
  FILE* f = fopen(argv[1], "r");
  cublasCreate(&handle);
  k<<<1, 32>>>(nullptr);
  return host_counter;
}
"""
    lib = port.load_cuda(src, filename="host.cu")
    x = np.full(32, -1, np.int32)
    lib.k(x, grid=1, block=32)
    np.testing.assert_array_equal(x, 2 * np.arange(32))


def test_fault_names_thread_and_block():
    lib = port.load_cuda("__global__ void k(float* x) { if (blockIdx.x == 2 && threadIdx.x == 7) x[1 << 28] = 1; "
                         "else x[0] = 0; }", filename="fault.cu")
    with pytest.raises(port.KernelError) as e:
        lib.k(np.zeros(4, np.float32), grid=4, block=32)
    assert e.value.thread == (7, 0, 0) and e.value.block == (2, 0, 0)
    assert "thread (7, 0, 0) of block (2, 0, 0)" in str(e.value)
    # The process survives and the library still works.
    x = np.ones(4, np.float32)
    lib.k(x, grid=1, block=1)
    assert x[0] == 0


def test_timeout_stops_an_endless_kernel():
    lib = port.load_cuda("__global__ void spin(volatile int* flag) { while (flag[0] == 0) {} }", filename="spin.cu")
    with pytest.raises(port.KernelTimeout):
        lib.spin(np.zeros(1, np.int32), grid=1, block=1, timeout=0.2)


def test_set_constant_and_errors():
    src = r"""
__constant__ float coef[3];
__constant__ int bias;
__device__ unsigned total;
__global__ void k(const float* x, float* y) {
  int i = threadIdx.x;
  y[i] = coef[0] + coef[1] * x[i] + coef[2] * x[i] * x[i] + bias;
  atomicAdd(&total, 1u);
}
"""
    lib = port.load_cuda(src, filename="const.cu")
    lib.set_constant("coef", np.array([1.0, 2.0, 3.0], np.float32))
    lib.set_constant("bias", 10)
    lib.set_constant("total", 0)
    x = np.arange(8, dtype=np.float32)
    y = np.full(8, np.nan, np.float32)
    lib.k(x, y, grid=1, block=8)
    np.testing.assert_array_equal(y, 1 + 2 * x + 3 * x * x + 10)
    assert int.from_bytes(lib.get_constant("total"), "little") == 8
    lib.set_constant("coef", [0.5], offset=8)  # cudaMemcpyToSymbol with an offset
    assert np.frombuffer(lib.get_constant("coef"), np.float32).tolist() == [1.0, 2.0, 0.5]
    with pytest.raises(ValueError, match="holds 12 bytes"):
        lib.set_constant("coef", np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="does not fit"):
        lib.set_constant("bias", 2**40)
    with pytest.raises(KeyError, match="coef, total"):
        lib.set_constant("missing", 1)


def test_struct_arguments_as_bytes_or_ctypes():
    src = r"""
struct P { int a; float b; double c; };
__global__ void k(P p, double* out) { out[0] = p.a + p.b + p.c; }
"""
    lib = port.load_cuda(src, filename="struct.cu")

    class P(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int), ("b", ctypes.c_float), ("c", ctypes.c_double)]

    out = np.full(1, np.nan)
    lib.k(P(1, 2.5, 0.25), out, grid=1, block=1)
    assert out[0] == 3.75
    lib.k(bytes(P(2, 0.5, 0.125)), out, grid=1, block=1)
    assert out[0] == 2.625
    with pytest.raises(TypeError, match="struct of 16 bytes; got 8 bytes"):
        lib.k(b"\0" * 8, out, grid=1, block=1)


def test_printf_is_returned_per_thread_in_order():
    lib = port.load_cuda(r"""
#include <cstdio>
__global__ void k() {
  printf("a %d\n", (int)threadIdx.x);
  __syncthreads();
  printf("b %d.%d\n", (int)blockIdx.x, (int)threadIdx.x);
}""", filename="printf.cu")
    out = lib.k(grid=2, block=3)
    assert [p.text for p in out] == [f"{w} {b}.{t}\n".replace("a 0.", "a ").replace(f"a {b}.", "a ")
                                     for b in range(2) for t in range(3) for w in "ab"]
    assert out[1].block == (0, 0, 0) and out[1].thread == (0, 0, 0)


def test_named_mask_semantics_on_fibers_and_work_item_loops(monkeypatch, tmp_path):
    # The same warp program in both execution modes: partial masks, lanes in
    # different branches that name each other, and a deadlock.
    src = r"""
__global__ void its(const int* x, int* out) {
  int lane = threadIdx.x % 32, v = x[threadIdx.x];
  if (lane < 16) v = __shfl_xor_sync(0xffffffffu, v, 16) * 10;
  else v = __shfl_xor_sync(0xffffffffu, v, 16) * 100;
  if (lane >= 16 && lane < 24) v = __shfl_sync(0x00ff0000u, v, 16) + 1;
  out[threadIdx.x] = v;
}
__global__ void stuck(int* out) {
  if (threadIdx.x == 3) return;
  if (threadIdx.x < 4) out[threadIdx.x] = __shfl_sync(0x0000000fu, (int)threadIdx.x + 5, 0);
}
__global__ void wrong_mask(int* out) { out[threadIdx.x] = __shfl_sync(0x1u, 1, 0); }
"""
    x = np.arange(64, dtype=np.int32)
    want = np.empty(64, np.int32)
    for t in range(64):
        lane, base = t % 32, t - t % 32
        want[t] = x[base + (lane ^ 16)] * (10 if lane < 16 else 100) if not 16 <= lane < 24 else x[base] * 100 + 1
    results = {}
    for wi in ("1", "0"):
        monkeypatch.setenv("METAL_KERNEL_WORKITEM_LOOPS", wi)
        lib = port.load_cuda(src, filename=f"its{wi}.cu")
        out = np.full(64, -1, np.int32)
        lib.its(x, out, grid=1, block=64)
        np.testing.assert_array_equal(out, want)
        results[wi] = lib.its.execution_mode
        # Lane 3 exited: an exited lane counts as arrived.
        out = np.full(32, -1, np.int32)
        lib.stuck(out, grid=1, block=32)
        assert out[:4].tolist() == [5, 5, 5, -1]
        with pytest.raises(port.KernelError, match="does not name the calling lane 1"):
            lib.wrong_mask(np.zeros(32, np.int32), grid=1, block=32)
    assert results == {"1": "workitem-loops", "0": "fibers"}


def test_defines_and_include_dirs(tmp_path):
    (tmp_path / "helpers.cuh").write_text("__device__ inline int times(int v) { return v * FACTOR; }\n")
    src = '#include "helpers.cuh"\n__global__ void k(int* x) { x[threadIdx.x] = times(threadIdx.x); }\n'
    lib = port.load_cuda(src, filename="defines.cu", include_dirs=[str(tmp_path)], defines={"FACTOR": 7})
    x = np.full(8, -1, np.int32)
    lib.k(x, grid=1, block=8)
    np.testing.assert_array_equal(x, 7 * np.arange(8))
