// Rule: __shfl_up_sync (an inclusive warp scan; lanes below delta keep their value).
__global__ void shfl_up_scan(const int* x, int* out) {
  int lane = threadIdx.x % 32;
  int v = x[threadIdx.x];
  for (int d = 1; d < 32; d *= 2) {
    int y = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += y;
  }
  out[threadIdx.x] = v;
}
