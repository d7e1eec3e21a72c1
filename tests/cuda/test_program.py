"""port.program: a whole CUDA program (host code and launches) on the CPU."""

from __future__ import annotations

import pytest

from metal_kernel.port import CudaCompileError
from metal_kernel.port.program import build_program, run_program

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <cuda_runtime.h>
__constant__ float scale;
__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  s[t] = t < n ? x[t] * scale : 0;
  __syncthreads();
  for (int o = blockDim.x / 2; o > 0; o /= 2) { if (t < o) s[t] += s[t + o]; __syncthreads(); }
  if (t == 0) out[blockIdx.x] = s[0];
}
template <class T> __global__ void twice(T* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2;
}
int main(int argc, char** argv) {
  int n = 200;
  float* h = (float*)malloc(n * sizeof(float));
  float ref = 0;
  for (int i = 0; i < n; i++) { h[i] = i * 0.5f; ref += 3 * 2 * h[i]; }
  float *d, *o;
  cudaMalloc(&d, n * sizeof(float));
  cudaMalloc(&o, sizeof(float));
  cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice);
  float three = 3;
  cudaMemcpyToSymbol(scale, &three, sizeof(float));
  twice<<<4, 64>>>(d, n);              // template arguments deduced, as in host code
  block_sum<<<1, 256>>>(d, o, n);
  float r;
  cudaMemcpy(&r, o, sizeof(float), cudaMemcpyDeviceToHost);
  printf("%s %f\n", r == ref ? "match" : "differ", r);
  return r == ref ? 0 : 1;
}
"""


def test_program_runs_host_code_and_launches():
    exe = build_program(PROGRAM, filename="program.cu")
    run = run_program(exe, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("match 59700.0")


def test_program_kernel_fault_is_reported():
    src = PROGRAM.replace("if (i < n) x[i] *= 2;", "x[i + (1 << 28)] *= 2;")
    run = run_program(build_program(src, filename="fault.cu"), timeout=120)
    assert run.returncode == 70
    assert "[metal-kernel] kernel failed: invalid memory access" in run.stderr
    assert "of block (" in run.stderr


def test_program_rejects_unsupported_constructs():
    with pytest.raises(CudaCompileError, match="inline PTX"):
        build_program(PROGRAM.replace("x[i] *= 2;", 'x[i] *= 2; asm("trap;");'), filename="asm.cu")
