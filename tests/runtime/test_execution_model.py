"""Grids, threadgroups, thread attributes, barriers and threadgroup memory."""

import numpy as np
import pytest
import torch

import metal_kernel

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

// Every thread writes its attributes; threads outside the grid must not exist.
kernel void attrs(device uint4* out [[buffer(0)]],
                  uint3 tpig [[thread_position_in_grid]],
                  uint3 tpitg [[thread_position_in_threadgroup]],
                  uint3 tgpig [[threadgroup_position_in_grid]],
                  uint tiitg [[thread_index_in_threadgroup]],
                  uint3 tptg [[threads_per_threadgroup]],
                  uint3 dtptg [[dispatch_threads_per_threadgroup]],
                  uint3 tgpg [[threadgroups_per_grid]],
                  uint3 tpg [[threads_per_grid]]) {
  uint lin = tpig.x + tpg.x * (tpig.y + tpg.y * tpig.z);
  out[4 * lin + 0] = uint4(tpig, tiitg);
  out[4 * lin + 1] = uint4(tpitg, tptg.x * tptg.y * tptg.z);
  out[4 * lin + 2] = uint4(tgpig, dtptg.x * dtptg.y * dtptg.z);
  out[4 * lin + 3] = uint4(tgpg, tpg.x * tpg.y * tpg.z);
}
kernel void short_attrs(device ushort* out [[buffer(0)]],
                        ushort2 tpig [[thread_position_in_grid]],
                        ushort lane [[thread_index_in_simdgroup]],
                        ushort sg [[simdgroup_index_in_threadgroup]],
                        ushort nsg [[simdgroups_per_threadgroup]],
                        ushort w [[threads_per_simdgroup]],
                        ushort ew [[thread_execution_width]]) {
  uint i = tpig.x + 100 * tpig.y;
  out[5 * i + 0] = lane; out[5 * i + 1] = sg; out[5 * i + 2] = nsg;
  out[5 * i + 3] = w; out[5 * i + 4] = ew;
}
// ggml/tinygrad style: buffers bound by parameter order, no attributes.
kernel void by_order(device const float* a, device const float* b, device float* c,
                     uint i [[thread_position_in_grid]]) {
  c[i] = a[i] - b[i];
}
kernel void mixed_binding(device float* c [[buffer(2)]], device const float* a,
                          device const float* b, uint i [[thread_position_in_grid]]) {
  c[i] = a[i] * b[i];
}
// Tree reduction with a barrier per level.
kernel void tree_sum(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                     uint lid [[thread_position_in_threadgroup]],
                     uint gid [[thread_position_in_grid]],
                     uint tg [[threadgroup_position_in_grid]],
                     uint n [[threads_per_threadgroup]]) {
  threadgroup float buf[256];
  buf[lid] = a[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  for (uint s = n / 2; s > 0; s >>= 1) {
    if (lid < s) buf[lid] += buf[lid + s];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  if (lid == 0) out[tg] = buf[0];
}
// Reverse within a group through threadgroup memory; every mem_flags value.
kernel void reverse_flags(device const int* a [[buffer(0)]], device int* out [[buffer(1)]],
                          uint lid [[thread_position_in_threadgroup]],
                          uint gid [[thread_position_in_grid]],
                          uint n [[threads_per_threadgroup]],
                          uint tg [[threadgroup_position_in_grid]]) {
  threadgroup int buf[64], buf2[64];
  buf[lid] = a[gid];
  threadgroup_barrier(mem_flags::mem_none);
  threadgroup_barrier(mem_flags::mem_device);
  threadgroup_barrier(mem_flags::mem_threadgroup | mem_flags::mem_device);
  threadgroup_barrier(mem_flags::mem_texture);
  buf2[n - 1 - lid] = buf[lid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = buf2[lid];
}
// The common bounds guard before a barrier: returned threads count as arrived.
kernel void guarded(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                    constant uint& n [[buffer(2)]],
                    uint gid [[thread_position_in_grid]], uint lid [[thread_position_in_threadgroup]],
                    uint tg [[threadgroup_position_in_grid]]) {
  threadgroup float buf[32];
  if (gid >= n) return;
  buf[lid] = a[gid];
  threadgroup_barrier(mem_flags::mem_threadgroup);
  if (lid == 0) {
    float s = 0;
    for (uint k = 0; k < 32 && tg * 32 + k < n; ++k) s += buf[k];
    out[tg] = s;
  }
}
// Two threadgroup arrays of a 2-D threadgroup: a tiled matrix multiply.
kernel void tiled_matmul(device const float* A [[buffer(0)]], device const float* B [[buffer(1)]],
                         device float* C [[buffer(2)]], constant uint& N [[buffer(3)]],
                         uint2 gid [[thread_position_in_grid]], uint2 lid [[thread_position_in_threadgroup]]) {
  threadgroup float As[8][8];
  threadgroup float Bs[8][8];
  float acc = 0;
  for (uint t = 0; t < N; t += 8) {
    As[lid.y][lid.x] = A[gid.y * N + t + lid.x];
    Bs[lid.y][lid.x] = B[(t + lid.y) * N + gid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint k = 0; k < 8; ++k) acc += As[lid.y][k] * Bs[k][lid.x];
    threadgroup_barrier(mem_flags::mem_threadgroup);
  }
  C[gid.y * N + gid.x] = acc;
}
kernel void dyn_tg(device const float* a [[buffer(0)]], device float* out [[buffer(1)]],
                   threadgroup float* scratch [[threadgroup(0)]],
                   uint lid [[thread_position_in_threadgroup]], uint gid [[thread_position_in_grid]],
                   uint n [[threads_per_threadgroup]]) {
  scratch[lid] = a[gid] * 2;
  threadgroup_barrier(mem_flags::mem_threadgroup);
  out[gid] = scratch[(lid + 1) % n];
}
kernel void big_tg(device float* out [[buffer(0)]], uint lid [[thread_position_in_threadgroup]]) {
  threadgroup float huge[9000];
  huge[lid] = 1;
  out[lid] = huge[lid];
}
constant int kScale [[function_constant(0)]];
constant bool kNegate [[function_constant(1)]];
kernel void fconst(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  int v = int(i) * kScale;
  if (kNegate) v = -v;
  out[i] = is_function_constant_defined(kNegate) ? v : 12345;
}
[[kernel]] void attr_spelled(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] + 1;
}
kernel void version(device int* out [[buffer(0)]], uint i [[thread_position_in_grid]]) {
#if defined(__METAL__) && defined(__METAL_VERSION__)
  out[i] = __METAL_VERSION__;
#else
  out[i] = -1;
#endif
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE, function_constants={"kScale": 3, 1: True})


def test_partial_threadgroups_do_not_run_threads_outside_the_grid(lib):
    out = torch.full((10 * 4 * 4,), 0xDEAD, dtype=torch.int32)
    lib.attrs(out, threads=10, group_size=4)
    rows = out.reshape(10, 4, 4)
    assert rows[9, 0].tolist() == [9, 0, 0, 1]  # tpig, tiitg
    assert rows[9, 1].tolist()[3] == 2  # the last group holds 2 threads
    assert rows[9, 2].tolist() == [2, 0, 0, 4]  # tgpig, dispatched size
    assert rows[9, 3].tolist() == [3, 1, 1, 10]  # groups per grid, threads per grid


def test_thread_attributes_in_3d(lib):
    out = torch.zeros(5 * 3 * 2 * 16, dtype=torch.int32)
    lib.attrs(out, threads=[5, 3, 2], group_size=[2, 2, 2])
    rows = out.reshape(2, 3, 5, 4, 4)
    tpig_x, tpig_y, tpig_z, tiitg = rows[1, 2, 3, 0].tolist()
    assert (tpig_x, tpig_y, tpig_z) == (3, 2, 1)
    tpitg = rows[1, 2, 3, 1].tolist()[:3]
    assert tpitg == [1, 0, 1]
    # thread_index_in_threadgroup = x + y*w + z*w*h over the *actual* group (2 x 1 x 2 here)
    assert tiitg == 1 + 0 * 2 + 1 * 2 * 1
    assert rows[1, 2, 3, 2].tolist() == [1, 1, 0, 8]


def test_ushort_and_vector_attribute_forms_and_simdgroup_ids(lib):
    out = torch.zeros(70 * 5, dtype=torch.int16)
    lib.short_attrs(out, threads=70, group_size=70)
    rows = out.reshape(70, 5)
    assert rows[33].tolist() == [1, 1, 3, 32, 32]
    assert rows[69].tolist() == [5, 2, 3, 32, 32]


def test_buffers_bound_by_parameter_order(lib, poison):
    a, b = torch.rand(17), torch.rand(17)
    c = poison(17)
    lib.by_order(a, b, c)
    assert torch.equal(c, a - b)


def test_unattributed_buffers_take_the_free_indices(lib, poison):
    a, b = torch.rand(9), torch.rand(9)
    c = poison(9)
    lib.mixed_binding(a, b, c)  # c is [[buffer(2)]]; a, b fill 0 and 1
    assert torch.equal(c, a * b)


def test_barrier_tree_reduction_over_many_threadgroups(lib, poison):
    a = torch.rand(256 * 37)
    out = poison(37)
    lib.tree_sum(a, out, threads=a.numel(), group_size=256)
    torch.testing.assert_close(out, a.reshape(37, 256).sum(1), rtol=1e-5, atol=1e-4)


def test_threadgroup_memory_is_per_group_and_every_mem_flags_value(lib):
    a = torch.arange(64 * 9, dtype=torch.int32)
    out = torch.full_like(a, -1)
    lib.reverse_flags(a, out, threads=a.numel(), group_size=64)
    assert torch.equal(out, a.reshape(9, 64).flip(1).flatten())


@pytest.mark.no_metal_check  # threads return before a barrier on purpose (the runtime's tolerance is under test; the checker reports it)
def test_threads_that_returned_count_as_arrived_at_a_barrier(lib, poison):
    n = 70
    a = torch.rand(96)
    out = poison(3)
    lib.guarded(a, out, n, threads=96, group_size=32, arg_casts={2: "int32"})
    torch.testing.assert_close(out, torch.stack([a[:32].sum(), a[32:64].sum(), a[64:70].sum()]))


def test_two_dimensional_tiled_matmul(lib, poison):
    n = 32
    A, B = torch.rand(n, n), torch.rand(n, n)
    C = poison((n, n))
    lib.tiled_matmul(A, B, C, n, threads=[n, n], group_size=[8, 8], arg_casts={3: "int32"})
    torch.testing.assert_close(C, A @ B, rtol=1e-5, atol=1e-5)


def test_threadgroup_parameter_sized_by_the_caller(lib, poison):
    a = torch.rand(128)
    out = poison(128)
    lib.dyn_tg(a, out, threads=128, group_size=64, threadgroup_memory={0: 64 * 4})
    expected = (a * 2).reshape(2, 64).roll(-1, 1).flatten()
    assert torch.equal(out, expected)


def test_threadgroup_parameter_without_size_is_an_error(lib):
    with pytest.raises(ValueError, match="threadgroup_memory"):
        lib.dyn_tg(torch.rand(4), torch.rand(4))


def test_static_threadgroup_memory_length(lib):
    assert lib.tree_sum.static_thread_group_memory_length == 256 * 4
    assert lib.reverse_flags.static_thread_group_memory_length == 2 * 64 * 4
    assert lib.tiled_matmul.static_thread_group_memory_length == 2 * 8 * 8 * 4


def test_threadgroup_memory_over_32k_fails_cleanly(lib):
    with pytest.raises(metal_kernel.KernelError, match="declares 36000 bytes of threadgroup memory"):
        lib.big_tg(torch.zeros(4))


def test_function_constants_by_name_and_index(lib):
    out = torch.zeros(5, dtype=torch.int32)
    lib.fconst(out)
    assert out.tolist() == [0, -3, -6, -9, -12]


def test_function_constant_not_given_is_undefined():
    lib = metal_kernel.compile_shader(SOURCE, function_constants={"kScale": 2})
    out = torch.zeros(3, dtype=torch.int32)
    lib.fconst(out)
    assert out.tolist() == [12345] * 3


def test_kernel_spelled_as_an_attribute(lib):
    x = torch.zeros(3)
    lib.attr_spelled(x)
    assert x.tolist() == [1.0, 1.0, 1.0]


def test_metal_version_is_predefined_and_configurable(lib):
    out = torch.zeros(1, dtype=torch.int32)
    lib.version(out)
    assert out.item() == 320
    lib31 = metal_kernel.compile_shader(SOURCE, language_version="3.1", function_constants={"kScale": 1})
    lib31.version(out)
    assert out.item() == 310


def test_defines_and_include_dirs(tmp_path):
    (tmp_path / "helpers.h").write_text("inline float helper(float x) { return x * SCALE; }\n")
    lib = metal_kernel.compile_shader(
        '#include "helpers.h"\nkernel void k(device float* x, uint i [[thread_position_in_grid]]) '
        "{ x[i] = helper(x[i]); }",
        include_dirs=[str(tmp_path)], defines={"SCALE": 4},
    )
    x = torch.ones(3)
    lib.k(x)
    assert x.tolist() == [4.0, 4.0, 4.0]


def test_many_threadgroups_run_on_several_cores(lib, poison):
    # Large enough that every worker takes groups; the result must not depend on it.
    a = torch.rand(256 * 512)
    out = poison(512)
    lib.tree_sum(a, out, threads=a.numel(), group_size=256)
    torch.testing.assert_close(out, a.reshape(512, 256).sum(1), rtol=1e-5, atol=1e-4)


def test_numpy_and_torch_buffers_mix(lib):
    a = np.arange(8, dtype=np.float32)
    b = torch.ones(8)
    c = np.full(8, np.nan, np.float32)
    lib.by_order(a, b, c)
    assert (c == a - 1).all()
