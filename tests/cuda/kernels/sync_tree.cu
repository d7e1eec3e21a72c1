// Rule: __syncthreads between the steps of a shared-memory tree reduction.
__global__ void sync_tree(const int* x, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
