// Rule: a __shared__ array is one per block, shared by its threads.
__global__ void shared_static(const float* in, float* out) {
  __shared__ float s[128];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[blockDim.x - 1 - t];
}
