// Rule: __ballot_sync over the full warp and over a divergent subset.
__global__ void vote_ballot(const int* x, unsigned* out) {
  int t = threadIdx.x, lane = t % 32;
  int v = x[t];
  out[t * 2] = __ballot_sync(0xffffffffu, v > 0);
  unsigned b = 0;
  if (lane >= 8 && lane < 24) b = __ballot_sync(0x00ffff00u, v & 1);
  out[t * 2 + 1] = b;
}
