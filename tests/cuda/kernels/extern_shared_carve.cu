// Rule: one dynamic shared buffer carved into arrays of different types.
extern __shared__ char smem[];
__global__ void extern_shared_carve(const float* a, const int* b, float* out, int n) {
  float* fs = reinterpret_cast<float*>(smem);
  int* is = reinterpret_cast<int*>(smem + n * sizeof(float));
  int t = threadIdx.x;
  fs[t] = a[t];
  is[t] = b[t];
  __syncthreads();
  out[t] = fs[n - 1 - t] * is[(t + 1) % n];
}
