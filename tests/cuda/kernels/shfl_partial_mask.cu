// Rule: a partial mask in divergent code: only the named lanes take part.
__global__ void shfl_partial_mask(const int* x, int* out) {
  int lane = threadIdx.x % 32;
  int v = x[threadIdx.x];
  if (lane < 16) {
    v = __shfl_sync(0x0000ffffu, v, (lane + 1) % 16);
  } else if (lane < 24) {
    v = __shfl_xor_sync(0x00ff0000u, v, 1) + 1000;
  } else {
    v = -v;
  }
  out[threadIdx.x] = v;
}
