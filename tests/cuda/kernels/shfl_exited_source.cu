// Rule (observed, undefined in CUDA): a shuffle whose source lane has exited.
__global__ void shfl_exited_source(const int* x, int* out) {
  int lane = threadIdx.x % 32;
  int v = x[threadIdx.x] + 1000;
  if (lane % 4 != 0) return;
  out[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 1, 4) + __shfl_xor_sync(0xffffffffu, v, 4);
}
