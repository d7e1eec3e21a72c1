// Rule: shuffles of 64-bit and half-precision values.
#include <cuda_fp16.h>
__global__ void shfl_types(const double* d, const long long* l, const __half2* h, double* od, long long* ol, __half2* oh) {
  int t = threadIdx.x;
  od[t] = __shfl_xor_sync(0xffffffffu, d[t], 5);
  ol[t] = __shfl_down_sync(0xffffffffu, l[t], 1);
  oh[t] = __shfl_sync(0xffffffffu, h[t], 31 - t);
}
