// Rule: __shfl_xor_sync butterfly: every lane gets the sum.
__global__ void shfl_xor_butterfly(const int* x, int* out) {
  int v = x[threadIdx.x];
  for (int m = 16; m > 0; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
  out[threadIdx.x] = v;
}
