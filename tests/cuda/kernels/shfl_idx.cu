// Rule: __shfl_sync broadcast and gather with the full mask.
__global__ void shfl_idx(const float* x, float* bcast, float* gather) {
  int t = threadIdx.x, lane = t % 32;
  float v = x[t];
  bcast[t] = __shfl_sync(0xffffffffu, v, 5);
  gather[t] = __shfl_sync(0xffffffffu, v, (lane * 7 + 3) % 32);
}
