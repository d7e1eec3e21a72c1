// Rule: __shfl_down_sync (lanes past the end keep their value).
__global__ void shfl_down_reduce(const int* x, int* out, int* raw) {
  int v = x[threadIdx.x];
  raw[threadIdx.x] = __shfl_down_sync(0xffffffffu, v, 3);
  for (int d = 16; d > 0; d /= 2) v += __shfl_down_sync(0xffffffffu, v, d);
  out[threadIdx.x] = v;
}
