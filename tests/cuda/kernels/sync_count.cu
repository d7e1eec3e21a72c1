// Rule: __syncthreads_count / _and / _or.
__global__ void sync_count(const int* x, int* out) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  int c = __syncthreads_count(v > 0);
  int a = __syncthreads_and(v > -100);
  int o = __syncthreads_or(v > 90);
  if (threadIdx.x == 0) { out[blockIdx.x * 3] = c; out[blockIdx.x * 3 + 1] = a; out[blockIdx.x * 3 + 2] = o; }
}
