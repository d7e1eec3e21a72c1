// Rule: __restrict__, __ldg and read-only loads.
__global__ void restrict_ldg(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __ldg(&x[i]) * __ldg(w + (i % 4)) + __ldcs(&x[(i + 1) % n]);
}
