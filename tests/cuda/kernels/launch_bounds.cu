// Rule: __launch_bounds__ and #pragma unroll.
__global__ void __launch_bounds__(128) launch_bounds(const int* x, int* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int acc = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) acc += x[i] * (k + 1);
#pragma unroll 2
  for (int k = 0; k < 5; ++k) acc ^= k << (i % 7);
  y[i] = acc;
}
