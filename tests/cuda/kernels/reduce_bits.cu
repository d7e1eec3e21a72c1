// Rule: __reduce_and/or/xor_sync.
__global__ void reduce_bits(const unsigned* x, unsigned* out) {
  int t = threadIdx.x;
  unsigned v = x[t];
  out[t * 3 + 0] = __reduce_and_sync(0xffffffffu, v | 0x10000000u);
  out[t * 3 + 1] = __reduce_or_sync(0xffffffffu, v & 0xffu);
  out[t * 3 + 2] = __reduce_xor_sync(0xffffffffu, v);
}
