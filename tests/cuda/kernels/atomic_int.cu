// Rule: atomicAdd on int: a histogram.
__global__ void atomic_int(const int* x, int* hist, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(&hist[x[i] % 16], 1);
}
