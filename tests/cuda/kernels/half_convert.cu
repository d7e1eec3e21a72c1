// Rule: cuda_fp16 conversions and their rounding modes (exact bits).
#include <cuda_fp16.h>
__global__ void half_convert(const float* x, unsigned short* out, float* back) {
  int i = threadIdx.x;
  float v = x[i];
  out[i * 4 + 0] = __half_as_ushort(__float2half_rn(v));
  out[i * 4 + 1] = __half_as_ushort(__float2half_rz(v));
  out[i * 4 + 2] = __half_as_ushort(__float2half_rd(v));
  out[i * 4 + 3] = __half_as_ushort(__float2half_ru(v));
  back[i] = __half2float(__float2half(v));
}
