// Rule: float <-> int conversion intrinsics (rounding modes, saturation, NaN) and bit casts.
__global__ void conversions(const float* x, int* out, unsigned* uout, float* fout) {
  int i = threadIdx.x;
  float v = x[i];
  out[i * 4 + 0] = __float2int_rn(v);
  out[i * 4 + 1] = __float2int_rz(v);
  out[i * 4 + 2] = __float2int_rd(v);
  out[i * 4 + 3] = __float2int_ru(v);
  uout[i * 2 + 0] = __float2uint_rn(v);
  uout[i * 2 + 1] = __float_as_uint(v);
  fout[i] = __int_as_float(__float_as_int(v) ^ 0x80000000) + __uint2float_rn(uout[i * 2] & 0xffu);
}
