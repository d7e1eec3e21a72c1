// Rule: __half2 <-> float2 conversions and the low/high parts.
#include <cuda_fp16.h>
__global__ void half2_float2(const float2* in, float2* out, float* parts) {
  int i = threadIdx.x;
  __half2 h = __float22half2_rn(in[i]);
  out[i] = __half22float2(h);
  parts[i * 3 + 0] = __low2float(h);
  parts[i * 3 + 1] = __high2float(h);
  parts[i * 3 + 2] = __half2float(__low2half(__floats2half2_rn(in[i].y, in[i].x)));
}
