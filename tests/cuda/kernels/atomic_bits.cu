// Rule: atomicAnd / atomicOr / atomicXor.
__global__ void atomic_bits(unsigned* out, unsigned long long* out64) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicOr(&out[0], 1u << (i % 32));
  atomicAnd(&out[1], ~(1u << (i % 29)));
  atomicXor(&out[2], (unsigned)i * 2654435761u);
  atomicOr(&out64[0], 1ull << (i % 64));
}
