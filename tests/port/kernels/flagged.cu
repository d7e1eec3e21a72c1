// One kernel per construct `metal-kernel port` flags (tests/port/test_flagged.py), and one that is fine.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
#define WARP_SIZE 64
__constant__ float big_table[20000];
__global__ void uses_double(const float* x, float* y) { double d = x[threadIdx.x]; y[threadIdx.x] = (float)(d * 2.0); }
__global__ void uses_asm(int* out) { int lane; asm("mov.u32 %0, %%laneid;" : "=r"(lane)); out[threadIdx.x] = lane; }
__global__ void uses_texture(cudaTextureObject_t tex, float* out) { out[threadIdx.x] = tex1Dfetch<float>(tex, threadIdx.x); }
__global__ void uses_grid_sync(float* out) { cg::grid_group g = cg::this_grid(); out[0] = 1.0f; g.sync(); }
__global__ void child(float* out) { out[0] = 1.0f; }
__global__ void uses_launch(float* out) { child<<<1, 1>>>(out); }
__global__ void uses_printf(const float* x, float* y) { printf("%f\n", x[threadIdx.x]); y[threadIdx.x] = x[threadIdx.x]; }
__global__ void uses_warp64(const float* x, float* y) { float v = x[threadIdx.x]; y[threadIdx.x] = __shfl_sync(0xffffffff, v, threadIdx.x % WARP_SIZE, WARP_SIZE); }
__global__ void uses_constant(float* y) { y[threadIdx.x] = big_table[threadIdx.x]; }
__global__ void uses_big_shared(const float* x, float* y) { __shared__ float s[9000]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads(); y[threadIdx.x] = s[8999 - threadIdx.x]; }
__global__ void uses_partial_mask(const int* x, int* y) {
  int v = x[threadIdx.x];
  if (threadIdx.x % 32 < 16) y[threadIdx.x] = __shfl_xor_sync(0x0000ffffu, v, 1);
}
__global__ void uses_atomic64(unsigned long long* c) { atomicAdd(c, 1ull); }
__global__ void many_buffers(float* a0, float* a1, float* a2, float* a3, float* a4, float* a5, float* a6, float* a7,
  float* a8, float* a9, float* a10, float* a11, float* a12, float* a13, float* a14, float* a15, float* a16, float* a17,
  float* a18, float* a19, float* a20, float* a21, float* a22, float* a23, float* a24, float* a25, float* a26,
  float* a27, float* a28, float* a29, float* a30, float* a31) { a0[0] = a31[0]; }
__global__ void fine(const float* x, float* y) { y[threadIdx.x] = x[threadIdx.x] + 1.0f; }
