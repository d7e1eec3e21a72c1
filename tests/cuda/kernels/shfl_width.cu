// Rule: shuffles with width < 32 work within segments of `width` lanes.
__global__ void shfl_width(const int* x, int* out) {
  int t = threadIdx.x;
  int v = x[t];
  out[t * 8 + 0] = __shfl_sync(0xffffffffu, v, 3, 16);
  out[t * 8 + 1] = __shfl_sync(0xffffffffu, v, 13, 8);   // 13 % 8 = 5
  out[t * 8 + 2] = __shfl_up_sync(0xffffffffu, v, 2, 8);
  out[t * 8 + 3] = __shfl_down_sync(0xffffffffu, v, 3, 4);
  out[t * 8 + 4] = __shfl_xor_sync(0xffffffffu, v, 1, 2);
  out[t * 8 + 5] = __shfl_xor_sync(0xffffffffu, v, 9, 8);   // later segment: own value; earlier: read
  out[t * 8 + 6] = __shfl_down_sync(0xffffffffu, v, 33);    // delta beyond the warp
  out[t * 8 + 7] = __shfl_sync(0xffffffffu, v, -1, 16);     // negative source lane
}
