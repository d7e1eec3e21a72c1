// Rule: __constant__ memory set from the host.
__constant__ float coef[4];
__constant__ int offset;
__global__ void constant_mem(const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i];
  y[i] = ((coef[3] * v + coef[2]) * v + coef[1]) * v + coef[0] + offset;
}
