// Rule: atomicAdd on float and double (the order of additions varies).
__global__ void atomic_float(const float* x, float* sum, double* dsum) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(sum, x[i]);
  atomicAdd(dsum, (double)x[i]);
}
