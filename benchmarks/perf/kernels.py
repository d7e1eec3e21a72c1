"""The benchmark's kernels: Metal sources (run by metal-kernel) and their
OpenCL C twins (run by PoCL). Data only; benchmarks/perf/cases.py says how
each one is launched and checked."""

# ----------------------------------------------------------- PoCL's rivals --

MSL = r"""
#include <metal_stdlib>
using namespace metal;

kernel void saxpy(device float* out [[buffer(0)]],
                  device const float* x [[buffer(1)]],
                  device const float* y [[buffer(2)]],
                  constant float& a [[buffer(3)]],
                  uint i [[thread_position_in_grid]]) {
  out[i] = a * x[i] + y[i];
}

// In place: y is read and written (a read-modify-write buffer).
kernel void saxpy_inplace(device float* y [[buffer(0)]],
                          device const float* x [[buffer(1)]],
                          constant float& a [[buffer(2)]],
                          uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}

// One partial sum per 256-thread group; the host adds the partials.
kernel void reduce_tree(device const float* x [[buffer(0)]],
                        device float* partial [[buffer(1)]],
                        uint gid [[thread_position_in_grid]],
                        uint lid [[thread_position_in_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float buf[256];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = 128; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) partial[tg] = buf[0];
}

// C = A * B, all N x N row-major, N a multiple of 16; 16x16 groups.
kernel void matmul_tiled(device const float* A [[buffer(0)]],
                         device const float* B [[buffer(1)]],
                         device float* C [[buffer(2)]],
                         constant uint& N [[buffer(3)]],
                         uint2 gid [[thread_position_in_grid]],
                         uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[16][16];
  threadgroup float Bs[16][16];
  const uint row = gid.y, col = gid.x;
  float acc = 0.0f;
  for (uint t = 0; t < N; t += 16) {
    As[lid.y][lid.x] = A[row * N + t + lid.x];
    Bs[lid.y][lid.x] = B[(t + lid.y) * N + col];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 16; ++k) acc += As[lid.y][k] * Bs[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  C[row * N + col] = acc;
}

// simd_sum within each simdgroup, partials in threadgroup memory, barrier,
// simd_sum of the partials by simdgroup 0. Groups of 256 = 8 simdgroups.
kernel void reduce_simd(device const float* x [[buffer(0)]],
                        device float* partial [[buffer(1)]],
                        uint gid [[thread_position_in_grid]],
                        uint tg [[threadgroup_position_in_grid]],
                        uint lane [[thread_index_in_simdgroup]],
                        uint sg [[simdgroup_index_in_threadgroup]]) {
  threadgroup float partials[32];
  const float s = simd_sum(x[gid]);
  if (lane == 0) partials[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (sg == 0) {
    const float v = lane < 8 ? partials[lane] : 0.0f;
    const float t = simd_sum(v);
    if (lane == 0) partial[tg] = t;
  }
}
"""

# Separate library: simdgroup matrices.
MSL_GEMM = r"""
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
using namespace metal;

// C = A * B (N x N, N a multiple of 32). A threadgroup of 4 simdgroups
// (128 threads) computes a 32x32 tile of C; each simdgroup a 16x16 sub-tile
// as 2x2 simdgroup_float8x8 accumulators, reading A and B from device memory.
kernel void gemm_simdgroup(device const float* A [[buffer(0)]],
                           device const float* B [[buffer(1)]],
                           device float* C [[buffer(2)]],
                           constant uint& N [[buffer(3)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint sg [[simdgroup_index_in_threadgroup]]) {
  const uint row0 = tg.y * 32 + (sg / 2) * 16;
  const uint col0 = tg.x * 32 + (sg % 2) * 16;
  simdgroup_float8x8 acc00 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 acc01 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 acc10 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 acc11 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
  simdgroup_float8x8 a0, a1, b0, b1;
  for (uint k = 0; k < N; k += 8) {
    simdgroup_load(a0, A + row0 * N + k, N);
    simdgroup_load(a1, A + (row0 + 8) * N + k, N);
    simdgroup_load(b0, B + k * N + col0, N);
    simdgroup_load(b1, B + k * N + col0 + 8, N);
    simdgroup_multiply_accumulate(acc00, a0, b0, acc00);
    simdgroup_multiply_accumulate(acc01, a0, b1, acc01);
    simdgroup_multiply_accumulate(acc10, a1, b0, acc10);
    simdgroup_multiply_accumulate(acc11, a1, b1, acc11);
  }
  simdgroup_store(acc00, C + row0 * N + col0, N);
  simdgroup_store(acc01, C + row0 * N + col0 + 8, N);
  simdgroup_store(acc10, C + (row0 + 8) * N + col0, N);
  simdgroup_store(acc11, C + (row0 + 8) * N + col0 + 8, N);
}
"""

OCL = r"""
__kernel void saxpy(__global float* out, __global const float* x,
                    __global const float* y, const float a) {
  const size_t i = get_global_id(0);
  out[i] = a * x[i] + y[i];
}

__kernel void saxpy_inplace(__global float* y, __global const float* x, const float a) {
  const size_t i = get_global_id(0);
  y[i] = a * x[i] + y[i];
}

__kernel void reduce_tree(__global const float* x, __global float* partial) {
  __local float buf[256];
  const uint lid = get_local_id(0);
  buf[lid] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = 128; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[get_group_id(0)] = buf[0];
}

__kernel void matmul_tiled(__global const float* A, __global const float* B,
                           __global float* C, const uint N) {
  __local float As[16][16];
  __local float Bs[16][16];
  const uint col = get_global_id(0), row = get_global_id(1);
  const uint lx = get_local_id(0), ly = get_local_id(1);
  float acc = 0.0f;
  for (uint t = 0; t < N; t += 16) {
    As[ly][lx] = A[row * N + t + lx];
    Bs[ly][lx] = B[(t + ly) * N + col];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint k = 0; k < 16; ++k) acc += As[ly][k] * Bs[k][lx];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  C[row * N + col] = acc;
}

// Twins of reduce_simd for a device without sub-groups (PoCL's CPU device
// has neither cl_khr_subgroups nor work_group_reduce_add).
// The tree: each 32-lane "simdgroup" is summed pairwise in local memory, as
// simd_sum sums it (16, 8, 4, 2, 1 apart), then the 8 partials the same way.
__kernel void reduce_simd(__global const float* x, __global float* partial) {
  __local float vals[256];
  __local float partials[8];
  const uint lid = get_local_id(0), lane = lid & 31;
  vals[lid] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = 16; s > 0; s >>= 1) {
    if (lane < s) vals[lid] += vals[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid < 8) partials[lid] = vals[lid * 32];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (uint s = 4; s > 0; s >>= 1) {
    if (lid < s) partials[lid] += partials[lid + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (lid == 0) partial[get_group_id(0)] = partials[0];
}

// The serial twin: the first lane of each 32 adds its lanes in order.
__kernel void reduce_simd_serial(__global const float* x, __global float* partial) {
  __local float vals[256];
  __local float partials[8];
  const uint lid = get_local_id(0);
  vals[lid] = x[get_global_id(0)];
  barrier(CLK_LOCAL_MEM_FENCE);
  if ((lid & 31) == 0) {
    float s = 0.0f;
    for (uint i = 0; i < 32; ++i) s += vals[lid + i];
    partials[lid >> 5] = s;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (lid == 0) {
    float t = 0.0f;
    for (uint i = 0; i < 8; ++i) t += partials[i];
    partial[get_group_id(0)] = t;
  }
}
"""

# Used instead of the local-memory reduce_simd when the device has sub-groups.
OCL_SUBGROUPS = r"""
#pragma OPENCL EXTENSION cl_khr_subgroups : enable
__kernel void reduce_simd(__global const float* x, __global float* partial) {
  __local float partials[256];
  const float s = sub_group_reduce_add(x[get_global_id(0)]);
  if (get_sub_group_local_id() == 0) partials[get_sub_group_id()] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (get_sub_group_id() == 0) {
    float v = 0.0f;
    for (uint i = get_sub_group_local_id(); i < get_num_sub_groups(); i += get_sub_group_size())
      v += partials[i];
    const float t = sub_group_reduce_add(v);
    if (get_sub_group_local_id() == 0) partial[get_group_id(0)] = t;
  }
}
"""

# ------------------------------------------ kernels written like real ones --

# MLX-style row softmax: one threadgroup per row, each thread strides over
# the row; simd_max / simd_sum, partials across simdgroups in threadgroup
# memory.
MSL_SOFTMAX = r"""
#include <metal_stdlib>
using namespace metal;

kernel void softmax_rows(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                         constant uint& axis [[buffer(2)]],
                         uint row [[threadgroup_position_in_grid]],
                         uint lid [[thread_position_in_threadgroup]],
                         uint lsize [[threads_per_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]],
                         uint nsg [[simdgroups_per_threadgroup]]) {
  threadgroup float shared[32];
  in += size_t(row) * axis;
  out += size_t(row) * axis;
  float m = -INFINITY;
  for (uint i = lid; i < axis; i += lsize) m = max(m, in[i]);
  m = simd_max(m);
  if (lane == 0) shared[sg] = m;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  m = simd_max(lane < nsg ? shared[lane] : -INFINITY);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.0f;
  for (uint i = lid; i < axis; i += lsize) s += fast::exp(in[i] - m);
  s = simd_sum(s);
  if (lane == 0) shared[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  s = simd_sum(lane < nsg ? shared[lane] : 0.0f);
  const float inv = 1.0f / s;
  for (uint i = lid; i < axis; i += lsize) out[i] = fast::exp(in[i] - m) * inv;
}
"""

# ggml-style q4_0 matrix-vector product: blocks of 32 weights as a half
# scale and 16 bytes of 4-bit values (w = d * (q - 8)); each simdgroup
# computes 4 rows, its lanes taking every 32nd block, then simd_sum.
MSL_Q4 = r"""
#include <metal_stdlib>
using namespace metal;

#define QK4_0 32
#define N_DST 4
typedef struct {
  half d;
  uint8_t qs[QK4_0 / 2];
} block_q4_0;

kernel void mul_mv_q4_0(device const block_q4_0* W [[buffer(0)]], device const float* x [[buffer(1)]],
                        device float* y [[buffer(2)]], constant uint& cols [[buffer(3)]],
                        uint tg [[threadgroup_position_in_grid]],
                        uint sg [[simdgroup_index_in_threadgroup]],
                        uint nsg [[simdgroups_per_threadgroup]],
                        uint lane [[thread_index_in_simdgroup]]) {
  const uint nb = cols / QK4_0;
  const uint first_row = (tg * nsg + sg) * N_DST;
  float sum[N_DST] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint ib = lane; ib < nb; ib += 32) {
    device const float* xb = x + ib * QK4_0;
    for (uint r = 0; r < N_DST; ++r) {
      device const block_q4_0& blk = W[(first_row + r) * nb + ib];
      float acc = 0.0f;
      for (uint j = 0; j < QK4_0 / 2; ++j) {
        const uint8_t q = blk.qs[j];
        acc += (float(q & 0x0F) - 8.0f) * xb[j] + (float(q >> 4) - 8.0f) * xb[j + QK4_0 / 2];
      }
      sum[r] += acc * float(blk.d);
    }
  }
  for (uint r = 0; r < N_DST; ++r) {
    const float t = simd_sum(sum[r]);
    if (lane == 0) y[first_row + r] = t;
  }
}
"""

# Layer norm with threadgroup (barrier) reductions: one group per row.
MSL_LAYERNORM = r"""
#include <metal_stdlib>
using namespace metal;

kernel void layer_norm(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                       device const float* w [[buffer(2)]], device const float* b [[buffer(3)]],
                       constant uint& n [[buffer(4)]], constant float& eps [[buffer(5)]],
                       uint row [[threadgroup_position_in_grid]],
                       uint lid [[thread_position_in_threadgroup]],
                       uint lsize [[threads_per_threadgroup]]) {
  threadgroup float buf[1024];
  x += size_t(row) * n;
  y += size_t(row) * n;
  float s = 0.0f;
  for (uint i = lid; i < n; i += lsize) s += x[i];
  buf[lid] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint stride = lsize / 2; stride > 0; stride >>= 1) {
    if (lid < stride) buf[lid] += buf[lid + stride];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const float mean = buf[0] / float(n);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float v = 0.0f;
  for (uint i = lid; i < n; i += lsize) {
    const float d = x[i] - mean;
    v += d * d;
  }
  buf[lid] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint stride = lsize / 2; stride > 0; stride >>= 1) {
    if (lid < stride) buf[lid] += buf[lid + stride];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  const float rstd = rsqrt(buf[0] / float(n) + eps);
  for (uint i = lid; i < n; i += lsize) y[i] = (x[i] - mean) * rstd * w[i] + b[i];
}
"""

# PyTorch's own strided unary kernel (c10/metal/indexing.h, unmodified, from
# the torch wheel), instantiated the way PyTorch's UnaryKernel.metal does.
MSL_C10_UNARY = r"""
#include <c10/metal/indexing.h>
#include <c10/metal/utils.h>
using namespace metal;
using namespace c10::metal;

struct exp_functor {
  template <typename T>
  inline T operator()(const T x) { return T(precise::exp(float(x))); }
};
REGISTER_UNARY_OP(exp, float, float);
"""

# A kernel including <c10/metal/utils.h>, for compile times.
C10_KERNEL = r"""
#include <c10/metal/utils.h>
using namespace metal;
kernel void relu_opmath(device float* out [[buffer(0)]],
                        constant float* in [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  using T = c10::metal::opmath_t<float>;
  out[i] = float(c10::metal::max(T(in[i]), T(0)));
}
"""

PLAIN_KERNEL = r"""
#include <metal_stdlib>
using namespace metal;
kernel void fill(device float* out [[buffer(0)]], constant float& v [[buffer(1)]],
                 uint i [[thread_position_in_grid]]) { out[i] = v; }
"""

# Libraries compiled by the benchmark, by name.
LIBRARIES = {"main": MSL, "gemm": MSL_GEMM, "softmax": MSL_SOFTMAX, "q4": MSL_Q4,
             "layernorm": MSL_LAYERNORM, "c10_unary": MSL_C10_UNARY}
