"""Work-item loops (runtime/workitem/): kernels with barriers and simd
functions compiled into loops over the threads of a group. Every kernel is
checked against torch with poisoned outputs, and against the same kernel on
fibers (METAL_KERNEL_WORKITEM_LOOPS=0), which must agree bit for bit."""

import pytest
import torch

import metal_kernel
from metal_kernel import KernelError
from metal_kernel.runtime.compiler import workitem_enabled

SOURCE = r"""
#include <metal_stdlib>
#include <metal_simdgroup_matrix>
#include <c10/metal/reduction_utils.h>
using namespace metal;

// Tree reduction; the group size is only known at run time, so the loop
// with the barrier stays a loop.
kernel void tree_sum(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                     uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                     uint tg [[threadgroup_position_in_grid]], uint tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[1024];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = tsize / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[tg] = buf[0];
}

// C (M x N) = A (M x K) * B (K x N), 8x8 tiles, any sizes (grid rounded up to 8).
kernel void matmul_tiled(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                         device float* C [[buffer(2)]], constant uint3& dims [[buffer(3)]],
                         uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[8][8];
  threadgroup float Bs[8][8];
  const uint M = dims.x, K = dims.y, N = dims.z;
  const uint row = gid.y, col = gid.x;
  float acc = 0.0f;
  for (uint t = 0; t < K; t += 8) {
    As[lid.y][lid.x] = (row < M && t + lid.x < K) ? A[row * K + t + lid.x] : 0.0f;
    Bs[lid.y][lid.x] = (t + lid.y < K && col < N) ? B[(t + lid.y) * N + col] : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += As[lid.y][k] * Bs[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// c10's threadgroup_sum / threadgroup_max: simd functions, then a divergent
// simd_sum of the partials (`if (idx < nsimd)`), barriers in between.
kernel void c10_sum_max(device const float* x [[buffer(0)]], device float* sums [[buffer(1)]],
                        device float* maxs [[buffer(2)]], constant uint& n [[buffer(3)]],
                        uint tid [[thread_position_in_threadgroup]], uint tsize [[threads_per_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float shared[32];
  threadgroup float shared2[32];
  float v = 0.0f, m = -INFINITY;
  for (uint i = tid; i < n; i += tsize) {
    v += x[tg * n + i];
    m = max(m, x[tg * n + i]);
  }
  const float s = c10::metal::threadgroup_sum(shared, v, tid, tsize);
  const float mx = c10::metal::threadgroup_max(shared2, m, tid, tsize);
  sums[tg * tsize + tid] = s;   // every thread gets the result
  maxs[tg * tsize + tid] = mx;
}

// Threads past the end return before the barrier; they count as arrived.
kernel void early_return(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                         constant uint& n [[buffer(2)]], uint gid [[thread_position_in_grid]],
                         uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[256];
  if (gid >= n) return;
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint other = lid ^ 1u;
  const uint g2 = gid - lid + other;
  y[gid] = buf[lid] + (g2 < n ? buf[other] : 0.0f);
}

// A barrier inside a loop whose trip count comes from a buffer; v is carried
// from round to round.
kernel void smooth_rounds(device float* data [[buffer(0)]], constant uint& rounds [[buffer(1)]],
                          uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                          uint tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  float v = data[gid];
  for (uint r = 0; r < rounds; ++r) {
    buf[lid] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v = v * 0.5f + buf[(lid + 1) % tsize] * 0.25f + buf[(lid + tsize - 1) % tsize] * 0.25f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  data[gid] = v;
}

// A thread-local array (dynamically indexed, so it stays in memory) and a
// local struct live across barriers.
struct Pair { float a; int b; };
kernel void local_array(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                        constant uint& k [[buffer(2)]], uint gid [[thread_position_in_grid]],
                        uint lid [[thread_position_in_threadgroup]], uint tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  float acc[8];
  thread Pair p = {x[gid * 8], int(gid)};
  for (uint i = 0; i < 8; ++i) acc[i] = x[gid * 8 + i];
  buf[lid] = acc[(k + lid) % 8];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = 0; i < 8; ++i) acc[(i + k) % 8] += buf[(lid + i) % tsize];
  p.a += buf[(lid + 3) % tsize];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  buf[lid] = acc[(k + 1) % 8];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float s = 0.0f;
  for (uint i = 0; i < 8; ++i) s += acc[i] * float(i + 1);
  y[gid] = s + p.a * float(p.b % 7) + buf[(lid + 5) % tsize];
}

// Divergent simd functions: three active sets per simdgroup.
kernel void divergent_simd(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                           uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]]) {
  const float v = x[gid];
  float r;
  if (lane < 8) r = simd_sum(v);
  else if (lane % 2 == 0) r = simd_max(v);
  else r = simd_prefix_exclusive_sum(v);
  y[gid] = r;
}

// simd functions in a loop whose trip count differs per lane, shuffles.
kernel void simd_loop(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                      constant uint& n [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                      uint lane [[thread_index_in_simdgroup]]) {
  float m = -INFINITY;
  for (uint i = lane; i < n; i += 32) m = max(m, x[row * n + i]);
  m = simd_max(m);
  float s = 0.0f;
  for (uint i = lane; i < n; i += 32) s += exp(x[row * n + i] - m);
  s = simd_sum(s);
  const float d = simd_shuffle_down(float(lane), 3u);
  for (uint i = lane; i < n; i += 32) y[row * n + i] = exp(x[row * n + i] - m) / s + d * 0.0f;
}

// 3-D groups, partial at the edges: ids after a barrier.
kernel void ids_3d(device uint* out [[buffer(0)]], uint3 gid [[thread_position_in_grid]],
                   uint3 lid [[thread_position_in_threadgroup]], uint3 tg [[threadgroup_position_in_grid]],
                   uint3 tpg [[threads_per_grid]], uint li [[thread_index_in_threadgroup]]) {
  threadgroup uint seen[64];
  seen[li] = li;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const uint at = (gid.z * tpg.y + gid.y) * tpg.x + gid.x;
  out[at * 4 + 0] = gid.x + 1000 * gid.y + 1000000 * gid.z;
  out[at * 4 + 1] = lid.x + 10 * lid.y + 100 * lid.z;
  out[at * 4 + 2] = tg.x + 10 * tg.y + 100 * tg.z;
  out[at * 4 + 3] = seen[li];
}

// A value the divergence analysis takes for uniform (a load from a fixed
// address) differs between threads: the driver notices and runs the region
// one thread at a time.
kernel void racy_uniform(device float* data [[buffer(0)]], device float* y [[buffer(1)]],
                         uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  if (gid == 3) data[0] = 7.0f;
  const float u = data[0];
  buf[lid] = u;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = u + buf[(lid + 1) % 64] * 0.0f;
}

// simdgroup matrix GEMM (N a multiple of 32): 4 simdgroups per 32x32 tile.
kernel void gemm_simdgroup(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                           device float* C [[buffer(2)]], constant uint& N [[buffer(3)]],
                           uint2 tg [[threadgroup_position_in_grid]], uint sg [[simdgroup_index_in_threadgroup]]) {
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

// Values live across several barriers that most regions leave alone (saved
// only where a region may redefine them): `a` never changes, `b` changes in
// the odd threads only, `c` only in the last round.
kernel void keep_across(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                        uint lid [[thread_position_in_threadgroup]], uint gid [[thread_position_in_grid]]) {
  threadgroup float buf[64];
  const float a = x[gid] * 2.0f;
  float b = a + 1.0f, c = x[gid];
  for (uint r = 0; r < 3; ++r) {
    buf[lid] = b;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (lid & 1) b += buf[(lid + 1) % 64];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (r == 2) c = c * 3.0f + simd_sum(b);
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  out[gid] = a * 1000.0f + b + c * 0.5f;
}

// Faults after a barrier are reported at the exact thread (the dispatch is
// replayed on fibers to find it).
kernel void fault_after_barrier(device float* x [[buffer(0)]], uint lid [[thread_position_in_threadgroup]],
                                uint gid [[thread_position_in_grid]]) {
  threadgroup float buf[64];
  buf[lid] = 1;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (gid == 77) { device float* p = (device float*)8; x[0] = *p; }
  x[gid] = buf[(lid + 1) % 64];
}

kernel void saxpy(device float* y [[buffer(0)]], device const float* x [[buffer(1)]],
                  constant float& a [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  y[i] = a * x[i] + y[i];
}
"""

WORKITEM_KERNELS = ["tree_sum", "matmul_tiled", "c10_sum_max", "early_return", "smooth_rounds",
                    "local_array", "divergent_simd", "simd_loop", "ids_3d", "racy_uniform",
                    "gemm_simdgroup", "fault_after_barrier", "keep_across"]


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


# fiber_lib and both: tests/runtime/conftest.py


def test_modes(lib, fiber_lib):
    # METAL_KERNEL_WORKITEM_LOOPS=0 runs the whole suite on fibers.
    default = "workitem-loops" if workitem_enabled() else "fibers"
    for k in WORKITEM_KERNELS:
        assert getattr(lib, k).execution_mode == default, k
        assert getattr(fiber_lib, k).execution_mode == "fibers", k
    # Without work-item loops a library that synchronises anywhere runs every
    # kernel on fibers (no per-kernel analysis).
    assert lib.saxpy.execution_mode == ("direct" if workitem_enabled() else "fibers")


def nan(*shape, dtype=torch.float32):
    return torch.full(shape, float("nan"), dtype=dtype)


@pytest.mark.parametrize("group", [32, 64, 256, 1024])
def test_tree_sum(both, group):
    torch.manual_seed(group)
    x = torch.randn(group * 37)
    out = nan(37)
    both.tree_sum(x, out, threads=x.numel(), group_size=group)
    torch.testing.assert_close(out, x.view(37, group).sum(1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("M,K,N", [(16, 16, 16), (13, 21, 9), (40, 8, 33)])
def test_matmul_tiled(both, M, K, N):
    torch.manual_seed(M * K * N)
    A, B = torch.randn(M, K), torch.randn(K, N)
    C = nan(M, N)
    r8 = lambda v: (v + 7) // 8 * 8  # noqa: E731
    both.matmul_tiled(A, B, C, [M, K, N, 0], arg_casts={3: "int32"}, threads=(r8(N), r8(M)), group_size=(8, 8))
    torch.testing.assert_close(C, A @ B, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("group", [32, 96, 256, 1024])
def test_c10_threadgroup_sum_and_max(both, group):
    torch.manual_seed(group)
    n, groups = 3000, 5
    x = torch.randn(groups, n)
    sums, maxs = nan(groups, group), nan(groups, group)
    both.c10_sum_max(x, sums, maxs, n, arg_casts={3: "int32"}, threads=groups * group, group_size=group)
    torch.testing.assert_close(sums, x.sum(1, keepdim=True).expand(groups, group), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(maxs, x.amax(1, keepdim=True).expand(groups, group))


@pytest.mark.no_metal_check  # threads return before a barrier on purpose
def test_early_return_before_barrier(both):
    n = 1000
    x = torch.randn(1024)
    y = nan(1024)
    both.early_return(x, y, n, arg_casts={2: "int32"}, threads=1024, group_size=256)
    want = x.clone()
    pair = x.view(-1, 2).flip(1).reshape(-1)
    want[:n] = x[:n] + torch.where(torch.arange(1024) ^ 1 < n, pair, torch.zeros(1024))[:n]
    torch.testing.assert_close(y[:n], want[:n])
    assert y[n:].isnan().all()


@pytest.mark.parametrize("rounds", [0, 1, 5])
def test_barrier_inside_a_loop(both, rounds):
    torch.manual_seed(rounds)
    data = torch.randn(512)
    want = data.view(2, 256).clone()
    for _ in range(rounds):
        want = want * 0.5 + want.roll(-1, 1) * 0.25 + want.roll(1, 1) * 0.25
    both.smooth_rounds(data, rounds, arg_casts={1: "int32"}, threads=512, group_size=256)
    torch.testing.assert_close(data.view(2, 256), want)


def test_local_array_and_struct_live_across_barriers(both):
    torch.manual_seed(1)
    n, tsize, k = 512, 128, 3
    x = torch.randn(n * 8)
    y = nan(n)
    both.local_array(x, y, k, arg_casts={2: "int32"}, threads=n, group_size=tsize)
    xv = x.view(n, 8)
    gid = torch.arange(n)
    lid = gid % tsize
    base = gid - lid
    buf1 = xv[gid, (k + lid) % 8]
    acc = xv.clone()
    for i in range(8):
        acc[:, (i + k) % 8] += buf1[base + (lid + i) % tsize]
    pa = xv[:, 0] + buf1[base + (lid + 3) % tsize]
    buf2 = acc[:, (k + 1) % 8]
    s = (acc * torch.arange(1, 9, dtype=torch.float32)).sum(1)
    want = s + pa * (gid % 7).float() + buf2[base + (lid + 5) % tsize]
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("threads", [64, 50])
def test_divergent_simd_calls(both, threads):
    torch.manual_seed(threads)
    x = torch.randn(threads)
    y = nan(threads)
    both.divergent_simd(x, y, threads=threads, group_size=threads)
    want = torch.empty(threads)
    for s0 in range(0, threads, 32):
        lanes = list(range(s0, min(s0 + 32, threads)))
        low = [t for t in lanes if t - s0 < 8]
        even = [t for t in lanes if t - s0 >= 8 and (t - s0) % 2 == 0]
        odd = [t for t in lanes if t - s0 >= 8 and (t - s0) % 2 == 1]
        for t in low:
            want[t] = x[low].sum()
        for t in even:
            want[t] = x[even].max()
        acc = torch.tensor(0.0)
        for t in odd:
            want[t] = acc
            acc = acc + x[t]
    torch.testing.assert_close(y, want)


@pytest.mark.parametrize("n", [32, 100, 7])
def test_simd_functions_in_divergent_loops(both, n):
    torch.manual_seed(n)
    x = torch.randn(6, n)
    y = nan(6, n)
    both.simd_loop(x, y, n, arg_casts={2: "int32"}, threads=6 * 32, group_size=32)
    torch.testing.assert_close(y, x.softmax(1))


def test_3d_partial_groups_after_a_barrier(both):
    grid = (7, 5, 3)
    out = torch.full((grid[0] * grid[1] * grid[2] * 4,), -1, dtype=torch.int32)
    both.ids_3d(out, threads=grid, group_size=(4, 2, 2))
    got = out.view(grid[2], grid[1], grid[0], 4)
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                lx, ly, lz = x % 4, y % 2, z % 2
                gs = (min(4, grid[0] - x + lx), min(2, grid[1] - y + ly), min(2, grid[2] - z + lz))
                li = lx + gs[0] * (ly + gs[1] * lz)
                assert got[z, y, x].tolist() == [x + 1000 * y + 1000000 * z, lx + 10 * ly + 100 * lz,
                                                  x // 4 + 10 * (y // 2) + 100 * (z // 2), li]


@pytest.mark.no_metal_check  # races on purpose
def test_values_taken_for_uniform_that_differ(both):
    data = torch.zeros(64)
    y = nan(64)
    both.racy_uniform(data, y, threads=64, group_size=64)
    # Thread 3's store races with the others' loads: each thread reads 0 or
    # 7 (fibers run the threads in order: 3 and later read 7; a vectorised
    # region loop reads a vector of threads at once). `u` looks uniform but
    # differs between threads, so each y must be the thread's own value,
    # never one thread's value for all.
    got = y.tolist()
    assert set(got) <= {0.0, 7.0}
    assert got[:3] == [0.0] * 3 and got[3] == 7.0


def test_simdgroup_matrix_gemm(both):
    torch.manual_seed(0)
    N = 64
    A, B = torch.randn(N, N), torch.randn(N, N)
    C = nan(N, N)
    both.gemm_simdgroup(A, B, C, N, arg_casts={3: "int32"}, threadgroups=(N // 32, N // 32), group_size=128)
    torch.testing.assert_close(C, A @ B, rtol=1e-4, atol=1e-4)


def test_values_kept_across_regions_that_do_not_touch_them(lib, fiber_lib):
    torch.manual_seed(3)
    x = torch.randn(128)
    outs = []
    for l in (lib, fiber_lib):
        out = nan(128)
        l.keep_across(x, out, threads=128, group_size=64)
        outs.append(out)
    # model: per group of 64
    xs = x.double().view(2, 64)
    a = xs * 2
    b = a + 1
    c = xs.clone()
    idx = (torch.arange(64) + 1) % 64
    odd = (torch.arange(64) & 1) == 1
    for r in range(3):
        b = torch.where(odd, b + b[:, idx], b)
        if r == 2:
            c = c * 3 + b.view(2, 2, 32).sum(2).repeat_interleave(32, 1)
    want = (a * 1000 + b + c * 0.5).view(-1).float()
    torch.testing.assert_close(outs[0], want, rtol=1e-4, atol=1e-2)
    assert torch.equal(outs[0], outs[1])


@pytest.mark.no_metal_check  # faults on purpose
def test_fault_after_a_barrier_names_the_thread(lib):
    with pytest.raises(KernelError, match=r"thread \[77, 0, 0\] \(threadgroup \[1, 0, 0\]\)"):
        lib.fault_after_barrier(torch.zeros(128), threads=128, group_size=64)
    x = torch.zeros(64)
    lib.tree_sum(torch.ones(64), x, threads=64, group_size=64)  # the library still works
    assert x[0] == 64


def test_both_modes_agree_bit_for_bit(lib, fiber_lib):
    torch.manual_seed(5)
    x = torch.randn(4, 3000)
    outs = []
    for l in (lib, fiber_lib):
        s, m = nan(4, 256), nan(4, 256)
        l.c10_sum_max(x, s, m, 3000, arg_casts={3: "int32"}, threads=4 * 256, group_size=256)
        y = nan(6, 100)
        l.simd_loop(x[:, :600].reshape(6, 400)[:, :100].contiguous(), y, 100, arg_casts={2: "int32"},
                    threads=6 * 32, group_size=32)
        outs.append((s, m, y))
    for a, b in zip(*outs):
        assert torch.equal(a, b)


FALLBACK = r"""
#include <metal_stdlib>
using namespace metal;
// A helper that synchronises and may not be inlined: the kernel cannot be
// cut into work-item loops and keeps its fibers.
__attribute__((noinline)) float exchange(threadgroup float* buf, uint lid, float v) {
  buf[lid] = v;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  return buf[lid ^ 1u];
}
kernel void swap_pairs(device float* x [[buffer(0)]], uint gid [[thread_position_in_grid]],
                       uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  x[gid] = exchange(buf, lid, x[gid]);
}
kernel void plain(device float* x [[buffer(0)]], uint gid [[thread_position_in_grid]]) { x[gid] += 1; }
kernel void with_barrier(device float* x [[buffer(0)]], uint gid [[thread_position_in_grid]],
                         uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  x[gid] = buf[63 - lid];
}
"""


def test_what_the_transform_cannot_cut_stays_on_fibers():
    lib = metal_kernel.compile_shader(FALLBACK)
    assert lib.swap_pairs.execution_mode == "fibers"
    assert lib.plain.execution_mode == ("direct" if workitem_enabled() else "fibers")
    assert lib.with_barrier.execution_mode == ("workitem-loops" if workitem_enabled() else "fibers")
    x = torch.arange(128, dtype=torch.float32)
    lib.swap_pairs(x, threads=128, group_size=64)
    assert x.tolist() == [float(i ^ 1) for i in range(128)]
    lib.with_barrier(x, threads=128, group_size=64)
    assert x.tolist() == [float((g - g % 64 + 63 - g % 64) ^ 1) for g in range(128)]


def test_switch_turns_work_item_loops_off(monkeypatch):
    monkeypatch.setenv("METAL_KERNEL_WORKITEM_LOOPS", "0")
    lib = metal_kernel.compile_shader(FALLBACK + "kernel void variant_off(device float* x [[buffer(0)]]) { x[0] = 1; }\n")
    assert lib.with_barrier.execution_mode == "fibers"
    x = torch.arange(64, dtype=torch.float32)
    lib.with_barrier(x, threads=64, group_size=64)
    assert x.tolist() == [float(63 - i) for i in range(64)]


# Kernels whose results the two execution modes must agree on bit for bit.
DIFFERENTIAL = r"""#include <metal_stdlib>
using namespace metal;

// half / bfloat / long / vectors live across barriers
kernel void types_across(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                         uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                         uint tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  half h = half(x[gid]);
  bfloat b = bfloat(x[gid] * 2.0f);
  long l = long(gid) * 1000000007L;
  float3 v3 = float3(x[gid], x[gid] + 1.0f, x[gid] * 3.0f);
  float4 v4 = float4(v3, 0.5f);
  uchar c = uchar(gid * 7);
  bool flag = x[gid] > 0.0f;
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  const float nb = buf[(lid + 1) % tsize];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  buf[lid] = nb * 2.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = float(h) + float(b) + float(l % 1000) + v3.x * v3.y + v4.w * v3.z + float(c) + (flag ? 1.0f : -1.0f) + buf[(lid + 3) % tsize];
}

// a uniform switch with barriers in the cases, a while loop with break
kernel void control(device float* data [[buffer(0)]], constant int& mode [[buffer(1)]],
                    uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                    uint tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  float v = data[gid];
  switch (mode) {
    case 0:
      buf[lid] = v;
      threadgroup_barrier(mem_flags::mem_threadgroup);
      v += buf[tsize - 1 - lid];
      break;
    case 1:
      buf[lid] = v * 2.0f;
      threadgroup_barrier(mem_flags::mem_threadgroup);
      v -= buf[(lid + 5) % tsize];
      threadgroup_barrier(mem_flags::mem_threadgroup);
      break;
    default:
      v = -v;
  }
  int it = 0;
  while (true) {
    buf[lid] = v;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    v = 0.5f * (v + buf[(lid + 1) % tsize]);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (++it >= mode + 2) break;
  }
  data[gid] = v + float(it);
}

// atomics around barriers, threadgroup parameter, nested loops with barriers
kernel void atomics_nested(device atomic_int* counter [[buffer(0)]], device int* out [[buffer(1)]],
                           threadgroup int* scratch [[threadgroup(0)]],
                           uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                           uint tsize [[threads_per_threadgroup]]) {
  threadgroup atomic_int local_count;
  if (lid == 0) atomic_store_explicit(&local_count, 0, memory_order_relaxed);
  threadgroup_barrier(mem_flags::mem_threadgroup);
  int acc = 0;
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 2; ++j) {
      scratch[lid] = int(gid) * (i + 1) + j;
      atomic_fetch_add_explicit(&local_count, 1, memory_order_relaxed);
      threadgroup_barrier(mem_flags::mem_threadgroup);
      acc += scratch[(lid + i + j) % tsize];
      threadgroup_barrier(mem_flags::mem_threadgroup);
    }
  }
  const int total = atomic_load_explicit(&local_count, memory_order_relaxed);
  atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
  out[gid] = acc + total;
}

// simd functions of every kind, in loops and divergent branches, quad functions
kernel void simd_zoo(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                     device uint* z [[buffer(2)]],
                     uint gid [[thread_position_in_grid]], uint lane [[thread_index_in_simdgroup]],
                     uint sg [[simdgroup_index_in_threadgroup]]) {
  float v = x[gid];
  float acc = 0.0f;
  for (uint k = 0; k < 3 + (sg % 2); ++k) {
    acc += simd_shuffle_xor(v, k + 1) + simd_prefix_inclusive_sum(v * float(k));
    v = simd_shuffle_down(v, 1u) + simd_broadcast_first(v);
  }
  uint bits = 0;
  if (v > 0.0f) {
    bits = uint(simd_vote::vote_t(simd_ballot(lane % 3 == 0)));
    acc += quad_sum(v) + float(simd_is_first());
  } else {
    acc -= quad_max(v) + simd_min(v);
  }
  simdgroup_barrier(mem_flags::mem_none);
  const int iv = int(gid) * 3 - 100;
  acc += float(simd_sum(iv)) + float(simd_and(uint(gid) | 1u)) + float(simd_any(v > 1.0f)) + float(simd_all(v > -5.0f));
  y[gid] = acc;
  z[gid] = bits;
}

// threads returning between barriers (they count as arrived)
kernel void staggered_return(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                             uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[128];
  buf[lid] = x[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  float v = buf[127 - lid];
  if (lid % 4 == 1) { y[gid] = v; return; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  buf[lid] = v * 2.0f;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid % 4 == 2) { y[gid] = buf[lid ^ 8]; return; }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  y[gid] = buf[(lid + 1) % 128] + v;
}

// math calls and a private array written and read in a barrier loop
float poly(float a, int n) { float r = 1.0f; for (int i = 0; i < n; ++i) r = r * a + float(i); return r; }
kernel void private_loop(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                         constant uint& rounds [[buffer(2)]],
                         uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[64];
  float hist[6] = {0, 0, 0, 0, 0, 0};
  float v = x[gid];
  for (uint r = 0; r < rounds; ++r) {
    buf[lid] = exp(v * 0.1f);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    hist[(r + lid) % 6] += buf[(lid + r) % 64];
    v = sin(v) + poly(buf[63 - lid], 3) * 0.01f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  float s = 0.0f;
  for (int i = 0; i < 6; ++i) s += hist[i] * float(i + 1);
  y[gid] = s + v;
}

// barriers at different call sites for different threads (not Metal-legal,
// but the runtime defines it: all live threads waiting at any barrier are released)
kernel void split_barriers(device float* y [[buffer(0)]], uint lid [[thread_position_in_threadgroup]],
                           uint gid [[thread_position_in_grid]]) {
  threadgroup float buf[64];
  buf[lid] = float(gid);
  if (lid < 16) {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[gid] = buf[63 - lid];
  } else {
    threadgroup_barrier(mem_flags::mem_threadgroup);
    y[gid] = buf[lid - 16] * 2.0f;
  }
}
"""


@pytest.fixture(scope="module")
def diff_libs():
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("METAL_KERNEL_WORKITEM_LOOPS", "0")
        fibers = metal_kernel.compile_shader(DIFFERENTIAL)
        mp.setenv("METAL_KERNEL_WORKITEM_LOOPS", "1")
        workitem = metal_kernel.compile_shader(DIFFERENTIAL)
    finally:
        mp.undo()
    return workitem, fibers


def _differential_run(lib, x):
    out = {}
    y = nan(512)
    lib.types_across(x, y, threads=512, group_size=256)
    out["types"] = y
    for mode in (0, 1, 2):
        d = x.clone()
        lib.control(d, mode, arg_casts={1: "int32"}, threads=512, group_size=128)
        out[f"control{mode}"] = d
    c = torch.zeros(1, dtype=torch.int32)
    o = torch.full((256,), -7, dtype=torch.int32)
    lib.atomics_nested(c, o, threads=256, group_size=64, threadgroup_memory={0: 64 * 4})
    out["atomics"], out["count"] = o, c
    # 96-thread groups, the last one partial (8 threads): simdgroups resolved
    # in the same round at points with operands of different sizes.
    y, z = nan(200), torch.zeros(200, dtype=torch.int32)
    lib.simd_zoo(x[:200].contiguous(), y, z, threads=200, group_size=96)
    out["simd"], out["ballots"] = y, z
    y = nan(256)
    lib.staggered_return(x[:256].contiguous(), y, threads=256, group_size=128)
    out["staggered"] = y
    y = nan(256)
    lib.private_loop(x[:256].contiguous(), y, 5, arg_casts={2: "int32"}, threads=256, group_size=64)
    out["private"] = y
    y = nan(128)
    lib.split_barriers(y, threads=128, group_size=64)
    out["split"] = y
    return out


@pytest.mark.no_metal_check  # random programs that race and diverge by construction
@pytest.mark.parametrize("seed", [0, 1])
def test_differential_against_fibers(diff_libs, seed):
    workitem, fibers = diff_libs
    for name in ("types_across", "control", "atomics_nested", "simd_zoo", "staggered_return",
                 "private_loop", "split_barriers"):
        assert getattr(workitem, name).execution_mode == "workitem-loops", name
    torch.manual_seed(seed)
    x = torch.randn(512)
    a, b = _differential_run(workitem, x), _differential_run(fibers, x)
    for key in a:
        assert not a[key].isnan().any(), key
        assert torch.equal(a[key], b[key]), key
    assert a["count"].item() == 256


@pytest.mark.parametrize("failure", ["raises", "bad_ir"])
def test_a_failing_transform_leaves_the_library_on_fibers(monkeypatch, failure):
    from metal_kernel.runtime import workitem

    def broken(text, symbols, debug=False):
        if failure == "raises":
            raise RuntimeError("simulated transform bug")
        return workitem.Result("this is not LLVM IR\n", {s: "workitem-loops" for s in symbols}, {}, set())

    monkeypatch.setattr(workitem, "transform", broken)
    # (a kernel of its own, so that the library is not in the cache already)
    lib = metal_kernel.compile_shader(
        FALLBACK + f"kernel void variant_{failure}(device float* x [[buffer(0)]]) {{ x[0] = 1; }}\n")
    assert lib.with_barrier.execution_mode == "fibers"
    x = torch.arange(64, dtype=torch.float32)
    lib.with_barrier(x, threads=64, group_size=64)
    assert x.tolist() == [float(63 - i) for i in range(64)]


def test_launches_beyond_the_work_item_layout_fall_back_to_fibers():
    # 66 buffers exceed the work-item driver's 64: those groups run on
    # fibers (the dispatch must not take the no-fiber path), same results.
    n = 66
    params = ", ".join(f"device const float* in{i} [[buffer({i})]]" for i in range(n - 1))
    total = " + ".join(f"in{i}[l]" for i in range(n - 1))
    src = f"""
    #include <metal_stdlib>
    using namespace metal;
    kernel void wide({params}, device float* out [[buffer({n - 1})]],
                     uint l [[thread_position_in_threadgroup]], uint g [[thread_position_in_grid]]) {{
      threadgroup float s[64];
      s[l] = {total};
      threadgroup_barrier(mem_flags::mem_threadgroup);
      out[g] = s[63 - l];
    }}"""
    lib = metal_kernel.compile_shader(src)
    assert lib.wide.execution_mode == ("workitem-loops" if workitem_enabled() else "fibers")
    ins = [torch.full((64,), float(i)) for i in range(n - 1)]
    out = torch.full((128,), float("nan"))
    lib.wide(*ins, out, threads=128, group_size=64)
    assert torch.equal(out, torch.full((128,), float(sum(range(n - 1)))))


def test_a_named_entry_block_is_the_entry():
    # The optimiser may give the entry block a name (one it merged in from an
    # inlined call: '_Z11ndtri_valuef.exit:'); its instructions belong to the
    # entry, not to an empty block before it (which compiled to invalid IR).
    from metal_kernel.runtime.ir import Module
    from metal_kernel.runtime.workitem import PerThread

    text = "\n".join([
        "define hidden void @__mk_wi_0(ptr noundef %0, i32 noundef %1, i32 noundef %2, i32 noundef %3,"
        " i32 noundef %4) #1 {",
        "_Z5valuef.exit:",
        "  %5 = zext i32 %1 to i64",
        "  %6 = getelementptr inbounds float, ptr %0, i64 %5",
        "  store float 1.0, ptr %6, align 4",
        "  ret void",
        "}",
        "",
    ])
    pt = PerThread(Module(text), 0, set())
    pt.parse()
    assert pt.order == ["v_Z5valuef.exit"]
    assert [i.text.split()[0] for i in pt.blocks[pt.entry].insts] == ["%v5", "%v6", "store", "ret"]
