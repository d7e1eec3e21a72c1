// Rule: __reduce_add/min/max_sync (int and unsigned).
__global__ void reduce_sync(const int* x, int* out) {
  int t = threadIdx.x;
  int v = x[t];
  out[t * 5 + 0] = __reduce_add_sync(0xffffffffu, v);
  out[t * 5 + 1] = __reduce_min_sync(0xffffffffu, v);
  out[t * 5 + 2] = __reduce_max_sync(0xffffffffu, v);
  out[t * 5 + 3] = (int)__reduce_max_sync(0xffffffffu, (unsigned)v);
  unsigned part = 0;
  if (t % 32 < 10) part = __reduce_add_sync(0x000003ffu, (unsigned)v);
  out[t * 5 + 4] = (int)part;
}
