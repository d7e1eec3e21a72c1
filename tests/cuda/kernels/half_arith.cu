// Rule: __half / __half2 arithmetic intrinsics round once (exact bits).
#include <cuda_fp16.h>
__global__ void half_arith(const __half* a, const __half* b, const __half* c, __half* out, __half2* out2) {
  int i = threadIdx.x;
  out[i * 6 + 0] = __hadd(a[i], b[i]);
  out[i * 6 + 1] = __hmul(a[i], b[i]);
  out[i * 6 + 2] = __hfma(a[i], b[i], c[i]);
  out[i * 6 + 3] = __hdiv(a[i], b[i]);
  out[i * 6 + 4] = __hmax(a[i], b[i]);
  out[i * 6 + 5] = a[i] * b[i] - c[i];
  __half2 p = __halves2half2(a[i], b[i]);
  __half2 q = __halves2half2(c[i], a[i]);
  out2[i * 2 + 0] = __hfma2(p, q, __float2half2_rn(0.5f));
  out2[i * 2 + 1] = __hadd2(__hmul2(p, q), __lowhigh2highlow(p));
}
