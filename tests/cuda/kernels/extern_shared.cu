// Rule: extern __shared__ is the launch's dynamic shared memory.
__global__ void extern_shared(const int* in, int* out) {
  extern __shared__ int buf[];
  int t = threadIdx.x;
  buf[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  int sum = 0;
  for (int i = 0; i <= t; ++i) sum += buf[i];
  out[blockIdx.x * blockDim.x + t] = sum;
}
