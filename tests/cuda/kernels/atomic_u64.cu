// Rule: atomicAdd and atomicMax on unsigned long long.
__global__ void atomic_u64(const unsigned* x, unsigned long long* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(&out[0], (unsigned long long)x[i] << 20);
  atomicMax(&out[1], (unsigned long long)x[i] * 3000000000ull);
  atomicMin(&out[2], (unsigned long long)x[i] + 5);
}
