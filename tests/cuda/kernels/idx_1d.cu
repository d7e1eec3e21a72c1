// Rule: threadIdx / blockIdx / blockDim / gridDim in one dimension.
__global__ void idx_1d(int* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = i * 7 + (int)gridDim.x * 1000 + (int)blockDim.x * 100000;
}
