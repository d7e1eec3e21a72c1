// What NVIDIA's compute-sanitizer racecheck reports for the shared-memory
// access patterns that this project's checker must classify the same way.
// Each kernel is launched alone (one block of 64 threads = 2 warps) so the
// report of each can be told apart:
//   ./racecheck_probe NAME   under compute-sanitizer --tool racecheck
#include <cstdio>
#include <cstring>

// Every lane of a warp writes the same value to its warp's slot (llm.c's
// "we could have a lane_id == 0 guard but not needed").
__global__ void same_value_in_warp(float* out) {
  __shared__ float s[2];
  s[threadIdx.x / 32] = 1.5f;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x / 32];
}

// The same, but lanes write different values.
__global__ void different_values_in_warp(float* out) {
  __shared__ float s[2];
  s[threadIdx.x / 32] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x / 32];
}

// Both warps write the same value to one slot.
__global__ void same_value_across_warps(float* out) {
  __shared__ float s[1];
  s[0] = 2.5f;
  __syncthreads();
  out[threadIdx.x] = s[0];
}

// Thread 0 overwrites a slot the other threads read, no barrier between.
__global__ void read_then_write(float* out) {
  __shared__ float s[1];
  if (threadIdx.x == 0) s[0] = 1.0f;
  __syncthreads();
  float v = s[0];
  if (threadIdx.x == 0) s[0] = 2.0f;
  out[threadIdx.x] = v;
}

// Thread 0 rewrites the same value a slot already holds while others read it.
__global__ void read_then_same_value_write(float* out) {
  __shared__ float s[1];
  if (threadIdx.x == 0) s[0] = 1.0f;
  __syncthreads();
  float v = s[0];
  if (threadIdx.x == 0) s[0] = 1.0f;
  out[threadIdx.x] = v;
}

// Correct: one writer per slot, a barrier, then readers.
__global__ void clean(float* out) {
  __shared__ float s[64];
  s[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[63 - threadIdx.x];
}

int main(int argc, char** argv) {
  float* out;
  cudaMalloc(&out, 64 * sizeof(float));
  const char* which = argc > 1 ? argv[1] : "";
#define RUN(k) if (!strcmp(which, #k)) { k<<<1, 64>>>(out); }
  RUN(same_value_in_warp) RUN(different_values_in_warp) RUN(same_value_across_warps) RUN(read_then_write)
  RUN(read_then_same_value_write) RUN(clean)
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s: %s\n", which, cudaGetErrorString(e));
  cudaFree(out);
  return e != cudaSuccess;
}
