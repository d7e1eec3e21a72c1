// Rule: __threadfence and an atomic ticket: the last block to finish sums
// every block's partial result (CUDA's threadFenceReduction pattern).
__device__ unsigned int tickets = 0;
__global__ void threadfence(const float* x, float* partial, float* total) {
  __shared__ bool last;
  __shared__ float s[64];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  if (t == 0) {
    float acc = 0;
    for (int i = 0; i < blockDim.x; ++i) acc += s[i];
    partial[blockIdx.x] = acc;
    __threadfence();
    unsigned ticket = atomicInc(&tickets, gridDim.x);
    last = ticket == gridDim.x - 1;
  }
  __syncthreads();
  if (last && t == 0) {
    float acc = 0;
    for (int b = 0; b < gridDim.x; ++b) acc += partial[b];
    total[0] = acc;
    tickets = 0;
  }
}
