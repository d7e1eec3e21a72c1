// Rule: cuda_bf16: conversions and arithmetic round to nearest even (exact bits).
#include <cuda_bf16.h>
__global__ void bf16(const float* x, const __nv_bfloat16* a, const __nv_bfloat16* b, __nv_bfloat16* out,
                     float* back) {
  int i = threadIdx.x;
  out[i * 5 + 0] = __float2bfloat16(x[i]);
  out[i * 5 + 1] = __hadd(a[i], b[i]);
  out[i * 5 + 2] = __hmul(a[i], b[i]);
  out[i * 5 + 3] = __hfma(a[i], b[i], __float2bfloat16(0.25f));
  __nv_bfloat162 p = __floats2bfloat162_rn(x[i], -x[i]);
  out[i * 5 + 4] = __high2bfloat16(__hadd2(p, __halves2bfloat162(a[i], b[i])));
  back[i] = __bfloat162float(a[i]) + __low2float(p);
}
