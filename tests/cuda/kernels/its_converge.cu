// Rule: independent thread scheduling: lanes in different branches that
// name each other in their masks exchange values.
__global__ void its_converge(const int* x, int* out) {
  int lane = threadIdx.x % 32;
  int v = x[threadIdx.x];
  if (lane < 16) {
    v = __shfl_xor_sync(0xffffffffu, v, 16) * 10;
  } else {
    v = __shfl_xor_sync(0xffffffffu, v, 16) * 100;
  }
  out[threadIdx.x] = v;
}
