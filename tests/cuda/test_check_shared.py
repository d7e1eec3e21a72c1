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


BLOCKS = r"""
__global__ void blocksum(const float* x, float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
__global__ void blocksum_racy_block(const float* x, float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = x[blockIdx.x * blockDim.x + threadIdx.x];
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    if (blockIdx.x != 5) __syncthreads();  // block 5 races
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
"""


def test_shared_memory_alike_in_every_block_is_checked_in_one_and_a_block_of_its_own_is_not():
    # blockIdx, blockDim and gridDim come from the group record: only the
    # first is block-specific (CUDA blocks are never partial).
    lib = port.load_cuda(BLOCKS, filename="blocks.cu")
    x = np.random.default_rng(0).random(64 * 16, dtype=np.float32)
    out = np.full(16, np.nan, np.float32)
    with check() as report:
        lib["blocksum"](x, out, grid=16, block=64)
    assert report.ok and report.by_representatives == 1, str(report)
    np.testing.assert_allclose(out, x.reshape(16, 64).sum(1), rtol=1e-5)
    with check() as report:
        lib["blocksum_racy_block"](x, out, grid=16, block=64)
    assert report.by_representatives == 0
    races = [f for f in report.findings if f.kind == "race"]
    assert races and {f.threadgroup for f in races} == {(5, 0, 0)}, str(report)
