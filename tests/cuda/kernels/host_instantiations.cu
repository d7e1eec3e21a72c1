// Rule: instantiations come from the host code's launches and explicit
// instantiations; multi-argument templates are named as CUDA spells them.
#include <cuda_fp16.h>
template <typename T, int N>
__global__ void fill(T* out, float v) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  out[i] = T(v * N + (float)i);
}
template <typename T>
__global__ void never_launched(T* out) { out[0] = T(1); }
template __global__ void fill<unsigned char, 2>(unsigned char*, float);
namespace work {
template <typename T> __global__ void ns_kernel(T* out) { out[threadIdx.x] = T(threadIdx.x * 3); }
}
void host(__half* h, float* f, int* k) {
  dim3 grid(2), block(32);
  fill<__half, 4><<<grid, block>>>(h, 0.5f);
  fill<float,4><<<2, 32, 0, 0>>>(f, 0.25f);
  work::ns_kernel<int><<<1, 32>>>(k);
}
