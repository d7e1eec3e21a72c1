// Rule: __match_any_sync: the lanes holding the same value.
__global__ void warp_match_any(const int* x, const float* f, unsigned* out) {
  int t = threadIdx.x;
  out[t * 2] = __match_any_sync(0xffffffffu, x[t]);
  out[t * 2 + 1] = __match_any_sync(0xffffffffu, f[t]);
}
