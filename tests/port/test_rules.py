"""Each translation rule of `metal-kernel port` (kernels/rules.cu): the Metal
it produces, and the port checked against load_cuda with verify (outputs
poisoned, both sides under metal_kernel.check())."""

from __future__ import annotations

import re
import struct

import numpy as np

from .conftest import poisoned


def _ok(res):
    assert res.ok, str(res)
    assert any(b.written for b in res.buffers)


def test_every_kernel_translates(rules_port):
    p = rules_port
    assert {k.spelling for k in p.kernels} >= {"params", "poly", "axpy<int, 3>", "axpy<float, 2>", "spaces", "reductions",
                                               "neighbours", "warps", "groups", "atomics", "numerics", "globals",
                                               "votes"}
    untranslated = [(k.spelling, [str(d) for d in k.diagnostics]) for k in p.kernels if not k.translated]
    assert not untranslated
    assert not [d for d in p.diagnostics if d.severity == "error"]
    lib = p.load()
    assert set(lib) == {k.spelling for k in p.kernels}


def test_kernel_parameters(rules_port):
    m = rules_port.metal
    assert "kernel void params(device const float* x [[buffer(0)]]" in m
    assert "constant int& mk_arg_n [[buffer(2)]]" in m and "int n = mk_arg_n;" in m
    assert "constant Affine& a [[buffer(3)]]" in m
    assert "uint3 threadIdx [[thread_position_in_threadgroup]]" in m
    x = np.arange(10, dtype=np.float32)
    _ok(rules_port.verify("params", x, poisoned(10), 8, struct.pack("<fi", 1.5, 3), grid=1, block=32))


def test_pointer_address_spaces(rules_port):
    m = rules_port.metal
    assert "kernel void poly(device const float* x [[buffer(0)]],\n    constant float* coef [[buffer(1)]]" in m
    x = np.linspace(-1, 1, 50).astype(np.float32)
    _ok(rules_port.verify("poly", x, np.array([0.5, -2.0, 3.0], np.float32), poisoned(50), 50, grid=1, block=64))


def test_templates_get_host_names(rules_port):
    m = rules_port.metal
    assert 'template [[host_name("axpy_float_2")]] [[kernel]] void axpy<float, 2>(' in m
    assert 'template [[host_name("axpy_int_3")]] [[kernel]] void axpy<int, 3>(' in m
    x = np.arange(100, dtype=np.int32)
    _ok(rules_port.verify("axpy<int, 3>", x, x[::-1].copy(), 7, 100, grid=1, block=128))
    xf = np.linspace(-1, 1, 100).astype(np.float32)
    _ok(rules_port.verify("axpy<float,2>", xf, xf.copy(), 1.5, 100, grid=1, block=128))


def test_helper_per_address_space(rules_port):
    m = rules_port.metal
    # one helper per combination of address spaces at its call sites
    assert "float sum3(threadgroup const float* p, int i)" in m
    assert "float sum3_dev(device const float* p, int i)" in m
    assert "sum3(tile, t) - sum3_dev(x + blockIdx.x * 64, t)" in m
    x = np.random.default_rng(1).random(192, dtype=np.float32)
    _ok(rules_port.verify("spaces", x, poisoned(128), grid=2, block=64))


def test_shared_memory_of_helpers_per_instantiation(rules_port):
    m = rules_port.metal
    # a helper's __shared__ array is declared in the kernel, one per template instantiation
    assert "threadgroup float block_reduce_partial_warp_sum[32];" in m
    assert "threadgroup float block_reduce_partial_warp_max[32];" in m
    assert "block_reduce<warp_sum_fn>(block_reduce_partial_warp_sum, threadIdx, blockDim, v)" in m
    # function pointers as template arguments become functor types
    assert "struct warp_sum_fn" in m and "typename op" in m
    assert "threadgroup float* cache [[threadgroup(0)]]" in m
    x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
    _ok(rules_port.verify("reductions", x, poisoned(6), grid=2, block=128, shared_mem=128 * 4))


def test_barrier_flags(rules_port):
    m = rules_port.metal
    body = m[m.index("kernel void neighbours"):]
    body = body[:body.index("\n}")]
    assert "threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup)" in body
    spaces = m[m.index("kernel void spaces"):]
    assert "threadgroup_barrier(mem_flags::mem_threadgroup);" in spaces[:spaces.index("\n}")]
    x = np.random.default_rng(3).random(128, dtype=np.float32)
    _ok(rules_port.verify("neighbours", x, poisoned(128), poisoned(128), grid=2, block=64))


def test_warp_functions(rules_port):
    m = rules_port.metal
    assert "mk_shfl_down(v, 3, 8, mk_lane)" in m and "uint mk_lane [[thread_index_in_simdgroup]]" in m
    assert "simd_ballot" in m and "simd_sum(v)" in m
    x = np.random.default_rng(4).integers(-50, 50, 64).astype(np.int32)
    _ok(rules_port.verify("warps", x, poisoned(256, np.int32), grid=1, block=64))


def test_cooperative_groups(rules_port):
    assert "namespace cooperative_groups {" in rules_port.metal
    assert "cg::this_thread_block(threadIdx, blockIdx, blockDim)" in rules_port.metal
    x = np.random.default_rng(5).integers(-100, 100, 64).astype(np.int32)
    _ok(rules_port.verify("groups", x, poisoned(192, np.int32), grid=1, block=64))


def test_atomics(rules_port):
    m = rules_port.metal
    assert "atomic_fetch_add_explicit((device atomic<float>*)(fsum), x[i], memory_order_relaxed)" in m
    assert "atomic_fetch_max_explicit((device atomic<int>*)(imax)" in m
    assert "mk_atomic_cas((device atomic<int>*)(p), assumed, as_type<int>(float(v)))" in m
    assert any(d.code == "MK1013" for d in rules_port.diagnostics)  # atomicInc by compare-and-swap
    x = np.random.default_rng(6).random(256, dtype=np.float32)
    res = rules_port.verify("atomics", x, np.zeros(1, np.float32), np.zeros(1, np.int32), np.zeros(1, np.float32),
                            np.zeros(1, np.uint32), grid=2, block=128)
    _ok(res)


def test_numerics(rules_port):
    m = rules_port.metal
    assert "precise::exp(x[i])" in m and "fast::exp(x[i])" in m and "mk_erf(x[i])" in m
    assert "half(x[i])" in m and "bfloat(x[i] * 3.0f)" in m
    x = np.linspace(-3, 3, 64).astype(np.float32)
    h = poisoned(64, np.float16)
    b = np.full(64, 0xA5A5, np.uint16)
    _ok(rules_port.verify("numerics", x, h, b, poisoned(256), grid=1, block=64))


def test_globals_and_null_buffers(rules_port):
    p = rules_port
    m = p.metal
    assert "constant float* coef [[buffer(2)]]" in m and "device int& hits [[buffer(3)]]" in m
    lib = p.cuda_library()
    lib.set_constant("coef", np.array([0.5, -1.0, 2.0, 0.25], np.float32))
    lib.set_constant("hits", 5)
    x = np.linspace(-1, 1, 32).astype(np.float32)
    _ok(p.verify("globals", x, poisoned(32), grid=1, block=32))
    assert "mk_present" in m
    v = np.random.default_rng(7).integers(-5, 5, 128).astype(np.int32)
    _ok(p.verify("votes", v, poisoned(2, np.int32), None, grid=2, block=64))
    _ok(p.verify("votes", v, poisoned(2, np.int32), poisoned(128, np.int32), grid=2, block=64))


def test_statistics_count_references(rules_port):
    s = rules_port.stats
    assert s["converted"]["by_name"]["__syncthreads"] >= 4
    assert s["converted"]["by_category"]["warp"] >= 5
    assert s["converted"]["by_category"]["atomic"] >= 4
    assert s["kernels"]["found"] == len(rules_port.kernels)
    assert 0 < s["lines_changed"] <= s["lines_total"]
    assert s["unconverted"]["total"] == 0
    text = rules_port.stats_text()
    assert re.search(r"CONVERTED refs count: \d+", text) and "CHANGED lines of code" in text


def test_bfloat_fma_rounds_once():
    # Metal has no bfloat fma; computing it in float and rounding again is
    # off by one bfloat ulp whenever the float sum lands on a bfloat halfway
    # point. The port's helper rounds once, as CUDA's __hfma does.
    from fractions import Fraction

    import torch

    import metal_kernel
    from metal_kernel.port.to_metal.helpers import helper_text

    lib = metal_kernel.compile_shader(
        "#include <metal_stdlib>\nusing namespace metal;\n" + helper_text(["hmath"]) +
        "kernel void k(device const bfloat* a [[buffer(0)]], device const bfloat* b [[buffer(1)]],"
        " device const bfloat* c [[buffer(2)]], device bfloat* o [[buffer(3)]], device bfloat* twice [[buffer(4)]],"
        " uint i [[thread_position_in_grid]]) {"
        "  o[i] = mk_hfma(a[i], b[i], c[i]); twice[i] = bfloat(fma(float(a[i]), float(b[i]), float(c[i]))); }")
    rng = np.random.default_rng(0)
    n = 1 << 16

    def bf16(x):
        return torch.from_numpy(x.astype(np.float32)).to(torch.bfloat16)

    a, b = bf16(rng.standard_normal(n)), bf16(rng.standard_normal(n))
    c = bf16(rng.standard_normal(n) * np.exp2(rng.integers(-30, 5, n)))
    o, twice = torch.full((n,), float("nan"), dtype=torch.bfloat16), torch.full((n,), float("nan"), dtype=torch.bfloat16)
    lib.k(a, b, c, o, twice)
    differ = (o.view(torch.int16) != twice.view(torch.int16)).nonzero().flatten().tolist()
    assert differ  # the inputs reach the double-rounding cases
    for i in differ:
        exact = Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i]))
        assert abs(Fraction(float(o[i])) - exact) < abs(Fraction(float(twice[i])) - exact), i
