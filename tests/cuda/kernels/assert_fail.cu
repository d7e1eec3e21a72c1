// Rule: a failing assert stops the kernel and names the thread.
#include <cassert>
__global__ void assert_fail(const int* x, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  assert(x[i] != 77);
  out[i] = x[i];
}
