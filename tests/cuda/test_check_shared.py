"""check() on CUDA kernels: dynamic shared memory (`extern __shared__`) is
bounded by the launch's shared_mem bytes, as compute-sanitizer's memcheck
bounds it (llm.c's layernorm_backward_kernel10 writes one float past it;
benchmarks/results/sanitizer_h200.json)."""

import numpy as np

from metal_kernel import check, port

SRC = r"""
__global__ void dyn(float* out, int n) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  if (threadIdx.x == 0) s[n] = 1.0f;
  __syncthreads();
  out[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
"""


def test_a_store_past_dynamic_shared_memory_is_found_and_not_made():
    lib = port.load_cuda(SRC, filename="dyn.cu")
    out = np.full(32, np.nan, np.float32)
    with check() as report:
        lib["dyn"](out, 32, grid=1, block=32, shared_mem=32 * 4)
    assert [(f.kind, f.line, f.address_space, f.offset) for f in report.findings] == \
        [("oob", "dyn.cu:5", "threadgroup", 128)]
    assert np.array_equal(out, np.arange(31, -1, -1, dtype=np.float32))  # s[0] was not overwritten


def test_within_dynamic_shared_memory_only_the_race_is_found():
    lib = port.load_cuda(SRC, filename="dyn.cu")
    out = np.full(32, np.nan, np.float32)
    with check(schedules=1) as report:  # thread 0 and thread 31 both store s[31]
        lib["dyn"](out, 31, grid=1, block=32, shared_mem=32 * 4)
    assert [(f.kind, f.line) for f in report.findings] == [("race", "dyn.cu:4")]
