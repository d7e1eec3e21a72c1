// Rule: __match_all_sync: the mask when every lane agrees, and the predicate.
__global__ void warp_match_all(const int* x, unsigned* out) {
  int t = threadIdx.x;
  int pred = -1;
  out[t * 4] = __match_all_sync(0xffffffffu, x[t] / 100, &pred);
  out[t * 4 + 1] = pred;
  out[t * 4 + 2] = __match_all_sync(0xffffffffu, x[t], &pred);
  out[t * 4 + 3] = pred;
}
