// Kernels whose ports tests/port/test_verify.py corrupts: verify must fail each corruption.
__global__ void tree_sum(const float* x, float* out) {
  __shared__ float s[128];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * 128 + t];
  __syncthreads();
  for (int stride = 64; stride > 0; stride /= 2) {
    if (t < stride) s[t] += s[t + stride];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
__global__ void transpose(const int* in, int* out, int n) {
  int r = blockIdx.y * blockDim.y + threadIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < n && c < n) out[c * n + r] = in[r * n + c];
}
__global__ void warp_sum(const int* x, int* out) {
  int v = x[blockIdx.x * blockDim.x + threadIdx.x];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffff, v, o);
  out[blockIdx.x * blockDim.x + threadIdx.x] = v;
}
__global__ void reads_only(const float* x, float* unused) { float v = x[threadIdx.x]; (void)v; }
__global__ void rows(const float* x, float* y, int C) {
  int i = threadIdx.x;
  float s = 0.0f;
  for (int c = 0; c < C; ++c) { s += x[i * C + c]; y[i * C + c] = s; }
}
