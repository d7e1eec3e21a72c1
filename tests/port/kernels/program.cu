// A whole CUDA program: verify_all sizes its kernels from these launches
// (tests/port/test_capture.py). `scale` is launched with deduced template
// arguments, so only the launch says which instantiation exists.
#include <cstdio>
#include <cstdlib>
template <typename T>
__global__ void scale(const T* x, T* y, T s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}
__global__ void gather(const int* idx, const float* table, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = table[idx[i]];
}
int main() {
  const int n = 300, rows = 50;
  float *x, *y, *table, *out;
  int* idx;
  cudaMalloc(&x, n * sizeof(float));
  cudaMalloc(&y, n * sizeof(float));
  cudaMalloc(&table, rows * sizeof(float));
  cudaMalloc(&out, n * sizeof(float));
  cudaMalloc(&idx, n * sizeof(int));
  float hx[n], ht[rows];
  int hi[n];
  for (int i = 0; i < n; ++i) { hx[i] = i * 0.5f; hi[i] = (i * 7) % rows; }
  for (int i = 0; i < rows; ++i) ht[i] = 100.0f + i;
  cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice);
  cudaMemcpy(table, ht, sizeof ht, cudaMemcpyHostToDevice);
  cudaMemcpy(idx, hi, sizeof hi, cudaMemcpyHostToDevice);
  scale<<<(n + 127) / 128, 128>>>(x, y, 2.5f, n);
  gather<<<3, 100>>>(idx, table, out, n);
  printf("done\n");
  return 0;
}
