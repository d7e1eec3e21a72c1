// Rule: __device__ variables persist between launches of the module.
__device__ unsigned counter;
__device__ float scale_by = 2.5f;
__global__ void device_reset() { counter = 0; }
__global__ void device_count(const int* flags) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (flags[i] > 0) atomicAdd(&counter, 1u);
}
__global__ void device_global(const float* x, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = x[i] * scale_by + (float)counter;
}
