// Rule: atomicCAS: a float max by compare-and-swap, and a 16-bit CAS counter.
__device__ float atomic_max_float(float* addr, float v) {
  int* p = (int*)addr;
  int old = *p, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= v) break;
    old = atomicCAS(p, assumed, __float_as_int(v));
  } while (assumed != old);
  return __int_as_float(old);
}
__global__ void atomic_cas(const float* x, float* out, unsigned short* counts) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomic_max_float(out, x[i]);
  unsigned short* c = &counts[i % 8];
  unsigned short old = *c, seen;
  do {
    seen = old;
    old = atomicCAS(c, seen, (unsigned short)(seen + 1 + i % 3));
  } while (old != seen);
}
