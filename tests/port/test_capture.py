"""verify_all on the file's own launches: the program runs with launch
capture, its first launch of each kernel gives the sizes, scalars and buffer
contents (integer indices stay in range), and a launch with deduced template
arguments names its instantiation."""

from __future__ import annotations

import numpy as np

from metal_kernel.port import port_cuda
from metal_kernel.port.to_metal.capture import capture_launches, explicit_instantiations, template_args

from .conftest import KERNELS


def test_template_arguments_from_the_kernel_signature():
    assert template_args("void k(float *, const T *, int) [T = float]") == "float"
    assert template_args("void k() [T = __half, N = 4]") == "__half, 4"
    assert template_args("void k(int)") is None


def test_verify_all_on_the_programs_launches():
    path = KERNELS / "program.cu"
    source = path.read_text()
    captures, problems = capture_launches(source, str(path), cwd=str(KERNELS))
    assert not problems
    assert set(captures) == {"scale<float>", "gather"}
    g = captures["gather"]
    assert g["grid"] == [3, 1, 1] and g["block"] == [100, 1, 1]
    idx = np.frombuffer(g["args"][0]["data"], np.int32)
    assert idx.tolist()[:4] == [0, 7, 14, 21] and len(idx) == 300
    assert np.frombuffer(g["args"][3]["bytes"], np.int32)[0] == 300
    p = port_cuda(source, filename=str(path))
    assert "scale<float>" not in {k.spelling for k in p.kernels}  # deduced: the source alone does not name it
    extra = explicit_instantiations(p, list(captures))
    assert "template __global__ void scale<float>(const float* x, float* y, float s, int n);" in extra
    p = port_cuda(source + extra, filename=str(path))
    results = {r.kernel: r for r in p.verify_all(captures=captures, check=False)}
    assert set(results) == {"scale<float>", "gather"}
    for r in results.values():
        assert r.ok, str(r)
        assert "the file's own launch" in r.notes[0]
    out = next(b for b in results["gather"].buffers if b.name == "out")
    assert out.written and out.elements == 300


RUNS = r"""
#include <cstdlib>
#include <cuda_runtime.h>
__global__ void add(float* out, const float* a, const float* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
__global__ void small(float* out, const float* a, const float* b, int n) {
    int i = threadIdx.x;
    if (i < n) out[i] = a[i] * b[i];
}
int main(int argc, char** argv) {
    int version = argc > 1 ? atoi(argv[1]) : 1;
    int n = version == 1 ? 1000 : 8;
    float *out, *a, *b;
    cudaMalloc(&out, n * sizeof(float)); cudaMalloc(&a, n * sizeof(float)); cudaMalloc(&b, n * sizeof(float));
    float h[1000];
    for (int i = 0; i < n; i++) h[i] = i;
    cudaMemcpy(a, h, n * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemcpy(b, h, n * sizeof(float), cudaMemcpyHostToDevice);
    if (version == 1) add<<<4, 256>>>(out, a, b, n); else small<<<1, 8>>>(out, a, b, n);
    cudaDeviceSynchronize();
    return 0;
}
"""


def test_each_run_keeps_its_own_buffers(tmp_path):
    # Every run numbers its launches from 0; the second run's first launch
    # must not replace the bytes the first run's launch recorded.
    path = tmp_path / "runs.cu"
    path.write_text(RUNS)
    captures, problems = capture_launches(RUNS, str(path), runs=[["1"], ["2"]], cwd=str(tmp_path))
    assert not problems
    assert set(captures) == {"add", "small"}
    assert [len(a["data"]) for a in captures["add"]["args"][:3]] == [4000, 4000, 4000]
    assert [len(a["data"]) for a in captures["small"]["args"][:3]] == [32, 32, 32]
    assert np.frombuffer(captures["add"]["args"][2]["data"], np.float32)[999] == 999
    p = port_cuda(RUNS, filename=str(path))
    results = {r.kernel: r for r in p.verify_all(captures=captures)}
    assert all(r.ok for r in results.values()), [str(r) for r in results.values()]


SM_ASSERT = r"""
#include <cassert>
#include <cuda_runtime.h>
__global__ void partial(float* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * x[i];
}
int main() {
    cudaDeviceProp prop;
    cudaGetDeviceProperties(&prop, 0);
    int grid = prop.multiProcessorCount * 8;
    assert(grid < 512);  // sized for a smaller GPU, as llm.c's global_norm.cu kernel 4
    int n = grid * 32;
    float *out, *x;
    cudaMalloc(&out, n * sizeof(float)); cudaMalloc(&x, n * sizeof(float));
    cudaMemset(x, 0, n * sizeof(float));
    partial<<<grid, 32>>>(out, x, n);
    cudaDeviceSynchronize();
    return 0;
}
"""


def test_a_failing_run_is_a_problem_and_a_smaller_device_captures(tmp_path):
    # 132 SMs * 8 blocks trips the program's own assert before its launch: the
    # run is reported, and the device can report fewer SMs (mkcuda/host.h).
    path = tmp_path / "sms.cu"
    path.write_text(SM_ASSERT)
    captures, problems = capture_launches(SM_ASSERT, str(path), cwd=str(tmp_path))
    assert captures == {} and len(problems) == 1 and "exited with" in problems[0], problems
    captures, problems = capture_launches(SM_ASSERT, str(path), cwd=str(tmp_path), env={"MK_CUDA_SM_COUNT": "16"})
    assert not problems and captures["partial"]["grid"][0] == 128
