// Rule: the _block and _system variants of the atomics.
__global__ void atomic_scopes(int* out, float* fout) {
  __shared__ int s;
  if (threadIdx.x == 0) s = 0;
  __syncthreads();
  atomicAdd_block(&s, (int)threadIdx.x);
  __syncthreads();
  if (threadIdx.x == 0) atomicAdd_system(&out[0], s);
  atomicMax_system(&out[1], (int)(blockIdx.x * 100 + threadIdx.x));
  atomicAdd_block(&fout[blockIdx.x], 0.5f);
}
