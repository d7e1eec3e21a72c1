"""Resume points in strided loops (runtime/workitem/loop_points.py): the
`for (i = lid; i < n; i += lsize)` loops of kernels with barriers run one
pass per iteration over every thread still in the loop. Checked with
poisoned outputs against numpy, bit for bit against the same kernels built
without points (METAL_KERNEL_LOOP_POINTS=0), and by counting the points the
transform made, so that the tests fail when the loops are left alone."""

import numpy as np
import pytest

import metal_kernel
from metal_kernel.runtime import workitem

STRIDED = r"""
#include <metal_stdlib>
using namespace metal;

// MLX / PyTorch style: a strided loop per thread, then a threadgroup tree.
kernel void row_sum_max(device const float* x [[buffer(0)]], device float* sums [[buffer(1)]],
                        device float* maxs [[buffer(2)]], constant uint& n [[buffer(3)]],
                        uint row [[threadgroup_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                        uint lsize [[threads_per_threadgroup]]) {
  threadgroup float s_buf[1024];
  threadgroup float m_buf[1024];
  float s = 0.0f, m = -INFINITY;
  for (uint i = lid; i < n; i += lsize) {
    const float v = x[row * n + i];
    s += v;
    m = max(m, v);
  }
  s_buf[lid] = s;
  m_buf[lid] = m;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) {
    float ts = 0.0f, tm = -INFINITY;
    for (uint t = 0; t < lsize; ++t) { ts += s_buf[t]; tm = max(tm, m_buf[t]); }
    sums[row] = ts;
    maxs[row] = tm;
  }
}

// The counter starts at the thread's index in a 2-D group (lin).
kernel void lin_based(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                      constant uint& n [[buffer(2)]], uint tid [[thread_index_in_threadgroup]],
                      uint2 tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  float s = 0.0f;
  for (uint i = tid; i < n; i += tsize.x * tsize.y) s += x[i] * float(i % 7);
  buf[tid] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[tid] = buf[tid] + buf[(tid + 1) % (tsize.x * tsize.y)];
}

// The counter starts at x in a 2-D group; each row runs its own trip count.
kernel void x_based_rows(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                         constant uint& n [[buffer(2)]], uint2 lid [[thread_position_in_threadgroup]],
                         uint2 tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[16][16];
  float s = 0.0f;
  const uint stop = n > lid.y * 3 ? n - lid.y * 3 : 0;
  for (uint i = lid.x; i < stop; i += tsize.x) s += x[lid.y * n + i];
  buf[lid.y][lid.x] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid.y * tsize.x + lid.x] = buf[lid.y][(lid.x + 1) % tsize.x] - s;
}

// 2-D, and threads leave at data-dependent iterations: the threads still in
// the loop are runs that start anywhere in a row.
kernel void x_based_break(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                          constant uint& n [[buffer(2)]], uint2 lid [[thread_position_in_threadgroup]],
                          uint2 tsize [[threads_per_threadgroup]]) {
  threadgroup float buf[16][16];
  float s = 0.0f;
  for (uint i = lid.x; i < n; i += tsize.x) {
    const float v = x[lid.y * n + i];
    if (v > 1.5f) break;
    s += v * float(i);
  }
  buf[lid.y][lid.x] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid.y * tsize.x + lid.x] = buf[lid.y][(lid.x + 1) % tsize.x] - s;
}

// MLX's softmax shape: strided loops around simd_max / simd_sum (rows of
// the region loops cut at simdgroups).
kernel void softmax_rows(device const float* in [[buffer(0)]], device float* out [[buffer(1)]],
                         constant uint& axis [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                         uint lid [[thread_position_in_threadgroup]], uint lsize [[threads_per_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]], uint sg [[simdgroup_index_in_threadgroup]],
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
  for (uint i = lid; i < axis; i += lsize) s += exp(in[i] - m);
  s = simd_sum(s);
  if (lane == 0) shared[sg] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  s = simd_sum(lane < nsg ? shared[lane] : 0.0f);
  for (uint i = lid; i < axis; i += lsize) out[i] = exp(in[i] - m) / s;
}

// Threads leave the loop from its body, at different iterations.
kernel void with_break(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                       constant uint& n [[buffer(2)]], uint lid [[thread_position_in_threadgroup]],
                       uint lsize [[threads_per_threadgroup]]) {
  threadgroup float buf[1024];
  float s = 0.0f;
  for (uint i = lid; i < n; i += lsize) {
    if (x[i] > 2.5f) break;
    s += x[i];
  }
  buf[lid] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = buf[lsize - 1 - lid];
}

// The counter is used after the loop, across a barrier (where the threads
// left the loop at different values of i - lid), and starts at an offset.
kernel void counter_after(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                          constant uint& n [[buffer(2)]], constant uint& first [[buffer(3)]],
                          uint lid [[thread_position_in_threadgroup]], uint lsize [[threads_per_threadgroup]]) {
  threadgroup float buf[1024];
  float s = 0.0f;
  uint i = lid + first;
  for (; i < n; i += lsize) s += x[i];
  buf[lid] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = buf[(lid + 3) % lsize] + float(i);
}

// A constant stride, and a store in the loop (the softmax's last pass).
kernel void scale_rows(device const float* x [[buffer(0)]], device float* y [[buffer(1)]],
                       constant uint& n [[buffer(2)]], uint row [[threadgroup_position_in_grid]],
                       uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float total[1];
  if (lid == 0) {
    float t = 0.0f;
    for (uint j = 0; j < n; ++j) t += x[row * n + j];
    total[0] = t;
  }
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint i = lid; i < n; i += 64) y[row * n + i] = x[row * n + i] / total[0];
}
"""
POINTS_IN_STRIDED = 10  # one per strided loop above

NOT_STRIDED = r"""
#include <metal_stdlib>
using namespace metal;

// Every thread runs the same counter: not a strided loop.
kernel void same_counter(device const float* x [[buffer(0)]], device const float* w [[buffer(1)]],
                         device float* out [[buffer(2)]], constant uint& n [[buffer(3)]],
                         uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float buf[256];
  float acc = 0.0f;
  for (uint k = 0; k < n; ++k) acc += x[k] * w[lid];
  buf[lid] = acc;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = buf[255 - lid];
}

// A strided loop inside another loop that synchronises nothing: threads
// could be in different outer iterations at a point, so none is made.
kernel void nested(device const float* x [[buffer(0)]], device float* out [[buffer(1)]],
                   constant uint& n [[buffer(2)]], constant uint& reps [[buffer(3)]],
                   uint lid [[thread_position_in_threadgroup]], uint lsize [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  float s = 0.0f;
#pragma clang loop unroll(disable)  // no copy of the inner loop outside the outer one
  for (uint r = 0; r < reps; ++r)
    for (uint i = lid; i < n; i += lsize) s += x[i] * float(r + 1);
  buf[lid] = s;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[lid] = buf[lsize - 1 - lid];
}
"""


def points_made(monkeypatch, tmp_path, source: str, enabled: bool = True):
    """Compiles `source` in an empty cache; returns the library and the
    number of resume points the work-item transform made."""
    made = []
    original = workitem.transform

    def spy(text, syms, **kw):
        result = original(text, syms, **kw)
        made.append(result.text.count("%mk.WiSync { i32 3,"))
        return result

    monkeypatch.setattr(workitem, "transform", spy)
    monkeypatch.setenv("METAL_KERNEL_CACHE_DIR", str(tmp_path / ("on" if enabled else "off")))
    monkeypatch.setenv("METAL_KERNEL_LOOP_POINTS", "1" if enabled else "0")
    lib = metal_kernel.compile_shader(source)
    return lib, sum(made)


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        tmp = tmp_path_factory.mktemp("points")
        on, count = points_made(mp, tmp, STRIDED, True)
        off, none = points_made(mp, tmp, STRIDED, False)
    finally:
        mp.undo()
    return on, off, count, none


def test_every_strided_loop_gets_a_point(libs):
    _, _, count, none = libs
    assert count == POINTS_IN_STRIDED
    assert none == 0  # METAL_KERNEL_LOOP_POINTS=0


def test_loops_that_are_not_strided_get_none(monkeypatch, tmp_path):
    lib, count = points_made(monkeypatch, tmp_path, NOT_STRIDED)
    assert count == 0
    x = np.random.default_rng(1).standard_normal(300).astype(np.float32)
    w = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    out = np.full(256, np.nan, np.float32)
    lib.same_counter(x, w, out, 300, threads=256, group_size=256, arg_casts={3: "int32"})
    np.testing.assert_allclose(out, (x.sum() * w)[::-1], rtol=1e-4, atol=1e-4)
    out = np.full(64, np.nan, np.float32)
    lib.nested(x, out, 300, 3, threads=64, group_size=64, arg_casts={2: "int32", 3: "int32"})
    part = np.array([x[t::64].sum() * 6 for t in range(64)])
    np.testing.assert_allclose(out, part[::-1], rtol=1e-4, atol=1e-4)


def run_both(libs, name, *args, **launch):
    """The kernel with points and without, on copies of the same poisoned
    outputs (the arrays in `args` that are NaN); both results."""
    on, off = libs[0], libs[1]
    results = []
    for lib in (on, off):
        copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
        getattr(lib, name)(*copies, **launch)
        results.append(copies)
    return results


def same_bits(a, b):
    assert np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


@pytest.mark.parametrize("n,group", [(0, 256), (1, 256), (5, 64), (255, 256), (256, 256), (257, 256),
                                     (1000, 96), (4096, 1024), (3000, 32)])
def test_row_sum_max(libs, n, group):
    rows = 5
    x = np.random.default_rng(n).standard_normal(rows * max(n, 1)).astype(np.float32)
    sums, maxs = np.full(rows, np.nan, np.float32), np.full(rows, np.nan, np.float32)
    (_, s1, m1, _), (_, s0, m0, _) = run_both(libs, "row_sum_max", x, sums, maxs, n, threadgroups=[rows],
                                              group_size=[group], arg_casts={3: "int32"})
    same_bits(s1, s0)
    same_bits(m1, m0)
    xr = x[:rows * n].reshape(rows, n) if n else np.zeros((rows, 0), np.float32)
    np.testing.assert_allclose(s1, xr.sum(axis=1), rtol=1e-4, atol=1e-3)
    np.testing.assert_array_equal(m1, xr.max(axis=1) if n else np.full(rows, -np.inf, np.float32))


@pytest.mark.parametrize("n", [0, 10, 64, 65, 999])
def test_lin_based_in_a_2d_group(libs, n):
    x = np.random.default_rng(n).standard_normal(max(n, 1)).astype(np.float32)
    out = np.full(64, np.nan, np.float32)
    (_, o1, _), (_, o0, _) = run_both(libs, "lin_based", x, out, n, threads=[8, 8], group_size=[8, 8],
                                      arg_casts={2: "int32"})
    same_bits(o1, o0)
    part = np.array([sum(float(x[i]) * (i % 7) for i in range(t, n, 64)) for t in range(64)])
    np.testing.assert_allclose(o1, part + np.roll(part, -1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 16, 40, 100])
def test_x_based_rows_with_their_own_trip_counts(libs, n):
    x = np.random.default_rng(n).standard_normal(16 * n).astype(np.float32)
    out = np.full(16 * 16, np.nan, np.float32)
    (_, o1, _), (_, o0, _) = run_both(libs, "x_based_rows", x, out, n, threads=[16, 16], group_size=[16, 16],
                                      arg_casts={2: "int32"})
    same_bits(o1, o0)
    s = np.zeros((16, 16))
    for y in range(16):
        stop = max(n - 3 * y, 0)
        for lx in range(16):
            s[y, lx] = sum(float(x[y * n + i]) for i in range(lx, stop, 16))
    np.testing.assert_allclose(o1.reshape(16, 16), np.roll(s, -1, axis=1) - s, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [7, 100, 333])
def test_x_based_runs_that_start_inside_a_row(libs, n):
    x = np.random.default_rng(n).standard_normal(12 * n).astype(np.float32)
    out = np.full(12 * 12, np.nan, np.float32)
    (_, o1, _), (_, o0, _) = run_both(libs, "x_based_break", x, out, n, threads=[12, 12], group_size=[12, 12],
                                      arg_casts={2: "int32"})
    same_bits(o1, o0)
    s = np.zeros((12, 12), np.float32)
    for y in range(12):
        for lx in range(12):
            for i in range(lx, n, 12):
                if x[y * n + i] > 1.5:
                    break
                s[y, lx] += x[y * n + i] * np.float32(i)
    np.testing.assert_allclose(o1.reshape(12, 12), np.roll(s, -1, axis=1) - s, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n,group", [(50, 32), (1000, 256), (700, 100)])
def test_threads_leaving_from_the_body(libs, n, group):
    x = np.random.default_rng(n).uniform(-1, 3, n).astype(np.float32)
    out = np.full(group, np.nan, np.float32)
    (_, o1, _), (_, o0, _) = run_both(libs, "with_break", x, out, n, threads=group, group_size=group,
                                      arg_casts={2: "int32"})
    same_bits(o1, o0)
    part = []
    for t in range(group):
        s = np.float32(0)
        for i in range(t, n, group):
            if x[i] > 2.5:
                break
            s += x[i]
        part.append(s)
    np.testing.assert_allclose(o1, np.array(part, np.float32)[::-1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n,first,group", [(10, 0, 4), (1000, 3, 256), (77, 80, 32)])
def test_counter_used_after_the_loop(libs, n, first, group):
    x = np.random.default_rng(n).standard_normal(n + group + first).astype(np.float32)
    out = np.full(group, np.nan, np.float32)
    (_, o1, _, _), (_, o0, _, _) = run_both(libs, "counter_after", x, out, n, first, threads=group,
                                            group_size=group, arg_casts={2: "int32", 3: "int32"})
    same_bits(o1, o0)
    s, last = np.zeros(group), np.zeros(group)
    for t in range(group):
        i = t + first
        while i < n:
            s[t] += x[i]
            i += group
        last[t] = i
    np.testing.assert_allclose(o1, np.roll(s, -3) + last, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 63, 64, 1000])
def test_stores_in_the_loop(libs, n):
    rows = 3
    x = np.random.default_rng(n).uniform(0.5, 1.5, rows * n).astype(np.float32)
    y = np.full(rows * n, np.nan, np.float32)
    (_, y1, _), (_, y0, _) = run_both(libs, "scale_rows", x, y, n, threadgroups=[rows], group_size=[64],
                                      arg_casts={2: "int32"})
    same_bits(y1, y0)
    xr = x.reshape(rows, n).astype(np.float64)
    np.testing.assert_allclose(y1.reshape(rows, n), xr / xr.sum(axis=1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("cols,group", [(1024, 256), (1000, 256), (77, 64), (5, 32), (3000, 1024), (100, 96)])
def test_softmax_with_simd_functions(libs, cols, group):
    rows = 6
    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32) * 4
    out = np.full_like(x, np.nan)
    (_, o1, _), (_, o0, _) = run_both(libs, "softmax_rows", x, out, cols, threadgroups=[rows], group_size=[group],
                                      arg_casts={2: "int32"})
    same_bits(o1, o0)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(o1, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
