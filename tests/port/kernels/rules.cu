// One kernel (or two) per translation rule of `metal-kernel port`; each is
// verified against load_cuda by tests/port/test_rules.py.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

// Kernels: parameters in CUDA order, a scalar the body modifies, a struct by value.
struct Affine {
  float scale;
  int shift;
};
__global__ void params(const float* x, float* y, int n, Affine a) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  n -= 1;  // a by-value parameter the kernel writes: a local copy in Metal
  if (i <= n) y[i] = x[i] * a.scale + a.shift;
}

// A read-only buffer every thread reads at the same index: Metal's constant space.
__global__ void poly(const float* x, const float* coef, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = coef[0] + coef[1] * x[i] + coef[2] * x[i] * x[i];
}

// Templates: host launches and explicit instantiations name the instantiations.
template <typename T, int K>
__global__ void axpy(const T* x, T* y, T alpha, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = alpha * x[i] * K + y[i];
}
template __global__ void axpy<int, 3>(const int*, int*, int, int);

// Device functions: the pointer parameter takes the address space of each call site.
__device__ float sum3(const float* p, int i) { return p[i] + p[i + 1] + p[i + 2]; }
__global__ void spaces(const float* x, float* y) {
  __shared__ float tile[66];
  int t = threadIdx.x;
  tile[t] = x[blockIdx.x * 64 + t];
  if (t < 2) tile[64 + t] = x[blockIdx.x * 64 + 64 + t];
  __syncthreads();
  y[blockIdx.x * 64 + t] = sum3(tile, t) - sum3(x + blockIdx.x * 64, t);
}

// Shared memory: dynamic (extern), and a helper's own __shared__ array, one
// per template instantiation (two reductions in one kernel must not share it).
__device__ float warp_sum(float v) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
  return v;
}
__device__ float warp_max(float v) {
  for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
  return v;
}
using reduce_fn = float (*)(float);
template <reduce_fn op>
__device__ float block_reduce(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = op(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < blockDim.x / 32 ? partial[lane] : -1e30f;
  return op(v);
}
__global__ void reductions(const float* x, float* out) {
  extern __shared__ float cache[];
  float v = x[blockIdx.x * blockDim.x + threadIdx.x];
  cache[threadIdx.x] = v;
  float s = block_reduce<warp_sum>(v);
  float m = block_reduce<warp_max>(v);
  __syncthreads();
  if (threadIdx.x == 0) {
    out[blockIdx.x * 3] = s;
    out[blockIdx.x * 3 + 1] = m;
    out[blockIdx.x * 3 + 2] = cache[blockDim.x - 1];
  }
}

// Synchronisation: device memory written before the barrier and read by
// another thread after it needs mem_device.
__global__ void neighbours(const float* x, float* tmp, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tmp[i] = x[i] * 2.0f;
  __syncthreads();
  y[i] = tmp[blockIdx.x * blockDim.x + (threadIdx.x + 1) % blockDim.x];
}

// Warp functions: widths below 32, a ballot, an active-lane mask.
__global__ void warps(const int* x, int* out) {
  int t = threadIdx.x;
  int v = x[t];
  out[t * 4] = __shfl_down_sync(0xffffffff, v, 3, 8);
  out[t * 4 + 1] = __shfl_sync(0xffffffff, v, 5, 16);
  out[t * 4 + 2] = __ballot_sync(0xffffffff, v > 0);
  out[t * 4 + 3] = __reduce_add_sync(__activemask(), v);
}

// Cooperative groups: a block, 32- and 8-thread tiles.
__global__ void groups(const int* x, int* out) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  auto t8 = cg::tiled_partition<8>(block);
  int v = x[block.thread_rank()];
  int r = block.thread_rank();
  out[r * 3] = cg::reduce(warp, v, cg::plus<int>());
  out[r * 3 + 1] = cg::reduce(t8, v, cg::greater<int>());
  out[r * 3 + 2] = t8.shfl_down(v, 1) + warp.meta_group_rank() * 1000;
}

// Atomics: float add, int max, a compare-and-swap loop, wrapping increment.
__device__ float atomic_fmax(float* addr, float v) {
  int* p = (int*)addr;
  int old = *p, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= v) break;
    old = atomicCAS(p, assumed, __float_as_int(v));
  } while (assumed != old);
  return __int_as_float(old);
}
__global__ void atomics(const float* x, float* fsum, int* imax, float* fmax, unsigned* ticket) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  atomicAdd(fsum, x[i]);
  atomicMax(imax, (int)(x[i] * 1000.0f));
  atomic_fmax(fmax, x[i]);
  atomicInc(ticket, 1000u);
}

// Numerics: half and bfloat intrinsics, precise and fast math.
__global__ void numerics(const float* x, __half* h, __nv_bfloat16* b, float* f) {
  int i = threadIdx.x;
  __half a = __float2half(x[i]);
  __half2 p = __floats2half2_rn(x[i], 0.5f);
  h[i] = __hadd(a, __low2half(__hmul2(p, p)));
  b[i] = __float2bfloat16(x[i] * 3.0f);
  f[i * 4] = expf(x[i]);
  f[i * 4 + 1] = __expf(x[i]);
  f[i * 4 + 2] = erff(x[i]);
  f[i * 4 + 3] = __float2int_rd(x[i] * 10.0f) + rsqrtf(fabsf(x[i]) + 1.0f);
}

// Globals: a __constant__ array the host sets, a __device__ counter.
__constant__ float coef[4];
__device__ int hits;
__global__ void globals(const float* x, float* y) {
  int i = threadIdx.x;
  y[i] = coef[0] + coef[1] * x[i] + coef[2] * x[i] * x[i] + coef[3];
  if (x[i] > 0.0f) atomicAdd(&hits, 1);
}

// __syncthreads_count and a buffer the kernel may be given as NULL.
__global__ void votes(const int* x, int* out, int* optional) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  int c = __syncthreads_count(v > 0);
  if (threadIdx.x == 0) out[blockIdx.x] = c;
  if (optional != nullptr) optional[blockIdx.x * blockDim.x + threadIdx.x] = c - v;
}

void launch(float* x, float* y, int n) {
  axpy<float, 2><<<(n + 127) / 128, 128>>>(x, y, 1.5f, n);
}
