// Rule: a __shared__ variable in a template device function is one per
// instantiation (llm.c's blockReduce<warpReduceSum> / <warpReduceMax>).
__device__ float warp_sum(float v) { for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o); return v; }
__device__ float warp_max(float v) { for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o)); return v; }
using reduce_t = float (*)(float);
template <reduce_t R>
__device__ float block_reduce(float v) {
  __shared__ float partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = R(v);
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
  return R(v);
}
__global__ void shared_per_instantiation(const float* x, float* out) {
  float v = x[threadIdx.x];
  float s = block_reduce<warp_sum>(v);
  float m = block_reduce<warp_max>(v);
  if (threadIdx.x == 0) { out[0] = s; out[1] = m; }
}
