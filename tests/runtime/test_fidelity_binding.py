"""Calls that would be silently wrong or kill the process later are refused
before the kernel runs, with the fix; legal but suspicious ones warn."""

import warnings

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel.runtime.binding import BindingWarning

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;
kernel void scale(device float* o [[buffer(0)]], device const float* x [[buffer(1)]],
                  constant float& factor [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  o[i] = x[i] * factor;
}
kernel void scale_half(device half* o [[buffer(0)]], constant half& factor [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  o[i] = factor;
}
kernel void count(device int* o [[buffer(0)]], constant uint& n [[buffer(1)]],
                  constant short& s [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  o[i] = int(n) + s;
}
kernel void dynamic_tg(device float* o [[buffer(0)]], threadgroup float* t [[threadgroup(0)]],
                       uint l [[thread_position_in_threadgroup]]) {
  t[l] = 1;
  o[l] = t[l];
}
kernel void endless(device float* o [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  for (uint j = 10; j >= 0; --j) o[i] += 1;
}
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def test_python_int_for_a_constant_float_is_refused_with_the_fix(lib):
    with pytest.raises(TypeError, match=r"argument 2 \('factor'\) is the Python int 2.*constant float& factor.*2\.0"):
        lib.scale(torch.zeros(4), torch.ones(4), 2)


def test_python_float_for_a_constant_half_is_refused_with_the_fix(lib):
    with pytest.raises(TypeError, match=r"'factor'.*half.*arg_casts=\{1: 'fp16'\}"):
        lib.scale_half(torch.zeros(4, dtype=torch.half), 1.5)


def test_python_float_for_an_integer_is_refused(lib):
    with pytest.raises(TypeError, match=r"'n'.*pass an int"):
        lib.count(torch.zeros(2, dtype=torch.int32), 3.0, 1)


def test_python_int_out_of_the_declared_range_is_refused(lib):
    with pytest.raises(ValueError, match=r"'s'.*does not fit"):
        lib.count(torch.zeros(2, dtype=torch.int32), 3, 70000)


def test_matching_scalars_and_arg_casts_still_bind(lib, poison):
    out = poison(4)
    lib.scale(out, torch.ones(4), 2.0)
    assert out.tolist() == [2.0] * 4
    h = poison(3, torch.half)
    lib.scale_half(h, 1.5, arg_casts={1: "fp16"})
    assert h.tolist() == [1.5] * 3
    n = poison(2, torch.int32)
    lib.count(n, 3, -1)
    assert n.tolist() == [2, 2]


def test_read_only_numpy_array_is_refused_as_a_writable_buffer(lib):
    out = np.zeros(4, np.float32)
    out.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 0 \('o'\) is a read-only numpy array"):
        lib.scale(out, np.ones(4, np.float32), 2.0)
    assert (out == 0).all()


def test_read_only_numpy_array_is_fine_as_an_input(lib):
    x = np.ones(4, np.float32)
    x.flags.writeable = False
    out = np.full(4, np.nan, np.float32)
    lib.scale(out, x, 3.0)
    assert out.tolist() == [3.0] * 4


def test_expanded_tensor_is_refused_as_an_output(lib):
    out = torch.zeros(1).expand(10**6)
    with pytest.raises(ValueError, match="share memory"):
        lib.scale(out, torch.ones(10**6), 2.0)


def test_broadcast_numpy_array_is_refused_as_an_output(lib):
    out = np.broadcast_to(np.zeros(1, np.float32), (1000,))
    with pytest.raises(ValueError, match="argument 0"):
        lib.scale(out, np.ones(1000, np.float32), 2.0)


def test_self_overlapping_view_is_refused_as_an_output(lib):
    base = torch.zeros(8)
    out = base.as_strided((4, 3), (1, 1))  # rows overlap
    with pytest.raises(ValueError, match="share memory"):
        lib.scale(out, torch.ones(12), 2.0, threads=12)


def test_expanded_tensor_is_not_refused_as_an_input(lib, poison):
    out = poison(1)
    lib.scale(out, torch.full((1,), 3.0).expand(6), 2.0, threads=1)
    assert out.tolist() == [6.0]


def test_default_threads_larger_than_the_first_tensors_memory_is_refused():
    lib = metal_kernel.compile_shader(
        "kernel void k(device const float* x [[buffer(0)]], device float* o [[buffer(1)]],"
        " uint i [[thread_position_in_grid]]) { o[0] = x[i]; }")
    with pytest.raises(ValueError, match="threads= defaults to the 1000 elements of argument 0"):
        lib.k(torch.zeros(1).expand(1000), torch.zeros(1))


def test_int_tensor_for_a_float_pointer_warns(lib):
    with pytest.warns(BindingWarning, match=r"argument 1 \('x'\) holds torch.int32 elements"):
        lib.scale(torch.zeros(4), torch.ones(4, dtype=torch.int32), 2.0)


def test_matching_tensors_do_not_warn(lib):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lib.scale(torch.zeros(4), torch.ones(4), 2.0)


def test_too_many_arguments_warn(lib):
    with pytest.warns(BindingWarning, match="the last 1 are ignored"):
        lib.scale(torch.zeros(4), torch.ones(4), 2.0, torch.zeros(4))


def test_threadgroup_memory_over_32k_is_refused(lib):
    with pytest.raises(ValueError, match="32 KiB"):
        lib.dynamic_tg(torch.zeros(4), threadgroup_memory={0: 40000})


def test_threadgroup_memory_within_32k_runs(lib, poison):
    out = poison(4)
    lib.dynamic_tg(out, threadgroup_memory={0: 32768}, group_size=4)
    assert out.tolist() == [1.0] * 4


def test_endless_loop_that_only_stores_is_not_deleted(lib):
    with pytest.raises(metal_kernel.KernelTimeout):
        lib.endless(torch.zeros(2), timeout=0.5)
