// Rule: __activemask in converged and divergent code.
__global__ void active_mask(unsigned* out) {
  int lane = threadIdx.x % 32;
  out[threadIdx.x * 2] = __activemask();
  unsigned m = 0;
  if (lane % 3 == 0) m = __activemask();
  __syncwarp();
  out[threadIdx.x * 2 + 1] = m;
}
