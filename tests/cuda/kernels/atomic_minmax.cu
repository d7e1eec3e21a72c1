// Rule: atomicSub / atomicExch / atomicMin / atomicMax on int, unsigned and long long.
__global__ void atomic_minmax(const int* x, int* iout, unsigned* uout, long long* lout) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int v = x[i];
  atomicMin(&iout[0], v);
  atomicMax(&iout[1], v);
  atomicSub(&iout[2], v);
  atomicMin(&uout[0], (unsigned)v * 2654435761u);
  atomicMax(&uout[1], (unsigned)v * 2654435761u);
  atomicSub(&uout[2], 3u);
  atomicMin(&lout[0], (long long)v * -10000000000ll);
  atomicMax(&lout[1], (long long)v * 10000000000ll);
  if (v == 42) atomicExch(&iout[3], i);
}
