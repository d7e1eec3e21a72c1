// Rule: __any_sync and __all_sync.
__global__ void vote_any_all(const int* x, int* out) {
  int t = threadIdx.x;
  int v = x[t];
  out[t * 4 + 0] = __any_sync(0xffffffffu, v > 95);
  out[t * 4 + 1] = __all_sync(0xffffffffu, v >= 0);
  out[t * 4 + 2] = __all_sync(0xffffffffu, v > 10);
  out[t * 4 + 3] = __any_sync(0xffffffffu, v < 0);
}
