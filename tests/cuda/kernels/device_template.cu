// Rule: __device__ helper functions and templates.
template <typename T>
__device__ __forceinline__ T clamp_to(T v, T lo, T hi) { return v < lo ? lo : (v > hi ? hi : v); }
__device__ int square(int v) { return v * v; }
__device__ __noinline__ float cube(float v) { return v * v * v; }
__global__ void device_template(const float* x, const int* k, float* y, int* z) {
  int i = threadIdx.x;
  y[i] = clamp_to(cube(x[i]), -0.5f, 0.5f);
  z[i] = clamp_to(square(k[i]), 10, 2000);
}
