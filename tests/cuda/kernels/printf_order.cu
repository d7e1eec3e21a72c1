// Rule: printf from kernels, each thread's lines in order.
#include <cstdio>
__global__ void printf_order(const int* x) {
  int t = threadIdx.x;
  printf("block %d thread %d value %d\n", (int)blockIdx.x, t, x[blockIdx.x * blockDim.x + t]);
  if (t % 3 == 0) printf("thread %d.%d again %.3f %s\n", (int)blockIdx.x, t, 0.5f * t, "ok");
}
