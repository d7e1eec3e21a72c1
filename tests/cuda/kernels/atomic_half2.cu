// Rule: atomicAdd on __half2 and __nv_bfloat162 (small integers: exact sums).
#include <cuda_fp16.h>
#include <cuda_bf16.h>
__global__ void atomic_half2(__half2* h, __nv_bfloat162* b, __half* hs) {
  int i = threadIdx.x;
  atomicAdd(&h[i % 4], __floats2half2_rn(1.0f, (float)(i % 3)));
  atomicAdd(&b[i % 4], __floats2bfloat162_rn(2.0f, (float)(i % 5)));
  atomicAdd(&hs[i % 2], __float2half(0.25f));
}
