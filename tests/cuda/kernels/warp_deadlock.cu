// Rule: a lane named in the mask that never arrives is reported (a GPU hangs).
__global__ void warp_deadlock(int* out) {
  if (threadIdx.x == 5) {
    __syncthreads();
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, (int)threadIdx.x, 0);
  }
}
