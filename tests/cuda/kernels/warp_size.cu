// Rule: warpSize is 32; lanes and warps of a block with a partial last warp.
__global__ void warp_size(int* out) {
  int t = threadIdx.x;
  out[t * 3 + 0] = warpSize;
  out[t * 3 + 1] = t % warpSize;
  out[t * 3 + 2] = t / warpSize;
}
