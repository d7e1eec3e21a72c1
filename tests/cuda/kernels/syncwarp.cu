// Rule: __syncwarp(mask) orders shared memory between the lanes it names.
__global__ void syncwarp(const int* x, int* out) {
  __shared__ int s[64];
  int t = threadIdx.x, lane = t % 32;
  s[t] = x[t];
  __syncwarp();
  int v = s[(t & ~31) + (lane + 1) % 32];
  __syncwarp();
  if (lane < 16) {
    s[t] = v * 2;
    __syncwarp(0x0000ffffu);
    v = s[(t & ~31) + (lane + 3) % 16];
  }
  out[t] = v;
}
