// Rule: Volta+: __syncwarp at different call sites in divergent branches
// still synchronises the lanes it names.
__global__ void syncwarp_sites(const int* x, int* out) {
  __shared__ int s[32];
  int lane = threadIdx.x;
  if (lane % 2 == 0) {
    s[lane] = x[lane] + 1;
    __syncwarp();
    out[lane] = s[lane ^ 1];
  } else {
    s[lane] = x[lane] - 1;
    __syncwarp();
    out[lane] = s[lane ^ 1] * 10;
  }
}
