"""torch.mps.compile_shader's calling convention, rule by rule, on CPU tensors."""

import ctypes

import numpy as np
import pytest
import torch

import metal_kernel
from metal_kernel import KernelError, MetalCompileError

SOURCE = r"""
#include <metal_stdlib>
using namespace metal;

kernel void full(device float* out, constant float& val, uint idx [[thread_position_in_grid]]) {
  out[idx] = val;
}
kernel void copy_i64(device long* out [[buffer(0)]], constant long& v [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  out[i] = v;
}
kernel void copy_i32(device int* out [[buffer(0)]], constant int& v [[buffer(1)]],
                     uint i [[thread_position_in_grid]]) {
  out[i] = v;
}
kernel void from_list(device float* out [[buffer(0)]], constant float* vals [[buffer(1)]],
                      uint i [[thread_position_in_grid]]) {
  out[i] = vals[i];
}
kernel void from_long_list(device long* out [[buffer(0)]], constant long* vals [[buffer(1)]],
                           uint i [[thread_position_in_grid]]) {
  out[i] = vals[i] * 2;
}
kernel void casts(device float* out [[buffer(0)]], constant half& h [[buffer(1)]],
                  constant bfloat& b [[buffer(2)]], constant short& s [[buffer(3)]],
                  constant char& c [[buffer(4)]], constant uchar& u [[buffer(5)]],
                  uint i [[thread_position_in_grid]]) {
  out[0] = float(h); out[1] = float(b); out[2] = float(s); out[3] = float(c); out[4] = float(u);
}
// Reads before and after its element: a view is bound at its storage offset
// and the whole storage stays addressable.
kernel void neighbours(device float* out [[buffer(0)]], device const float* view [[buffer(1)]],
                       uint i [[thread_position_in_grid]]) {
  out[i] = view[int(i) - 1] + view[i + 1];
}
kernel void record_grid(device uint* out [[buffer(0)]],
                        uint3 tpig [[thread_position_in_grid]],
                        uint3 tptg [[threads_per_threadgroup]],
                        uint3 grid [[threads_per_grid]]) {
  uint lin = tpig.x + grid.x * (tpig.y + grid.y * tpig.z);
  out[lin] = tptg.x * 10000 + tptg.y * 100 + tptg.z;
}
struct Params { long n; float scale; int pad; ulong offset; };
kernel void with_struct(device float* out [[buffer(0)]], constant Params& p [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  if (long(i) < p.n) out[i] = p.scale * float(i + p.offset);
}
kernel void bool_tensor(device bool* out [[buffer(0)]], device const bool* in [[buffer(1)]],
                        uint i [[thread_position_in_grid]]) {
  out[i] = !in[i];
}
kernel void complex_conj(device float2* out [[buffer(0)]], device const float2* in [[buffer(1)]],
                         uint i [[thread_position_in_grid]]) {
  out[i] = float2(in[i].x, -in[i].y);
}
template <typename T>
kernel void twice(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {
  x[i] = x[i] + x[i];
}
template [[host_name("twice_float")]] kernel void twice<float>(device float*, uint);
template [[host_name("twice_half")]] kernel void twice<half>(device half*, uint);
template [[host_name("twice_bfloat")]] kernel void twice<bfloat>(device bfloat*, uint);
"""


@pytest.fixture(scope="module")
def lib():
    return metal_kernel.compile_shader(SOURCE)


def test_docstring_example_of_torch_mps_compile_shader():
    lib = metal_kernel.compile_shader(
        "kernel void full(device float* out, constant float& val, uint idx [[thread_position_in_grid]])"
        "{ out[idx] = val; }"
    )
    x = torch.full((10,), float("nan"))
    lib.full(x, 3.14)
    assert torch.equal(x, torch.full((10,), 3.14))


def test_dir_lists_kernels_and_host_names(lib):
    names = dir(lib)
    for n in ("full", "twice_float", "twice_half", "twice_bfloat", "with_struct"):
        assert n in names
    assert "twice" not in names  # templates are reachable only through host names


def test_kernel_properties_like_a_device(lib):
    k = lib.full
    assert k.max_threads_per_threadgroup == 1024
    assert k.thread_execution_width == 32
    assert k.static_thread_group_memory_length == 0


def test_python_int_is_bound_as_int64(lib):
    out = torch.full((3,), -1, dtype=torch.int64)
    lib.copy_i64(out, 2**40 + 5)
    assert out.tolist() == [2**40 + 5] * 3


def test_python_float_is_bound_as_float32(lib, poison):
    out = poison(4)
    lib.full(out, 0.1)
    assert out.tolist() == [np.float32(0.1).item()] * 4


def test_list_of_floats_is_a_float32_array(lib, poison):
    out = poison(3)
    lib.from_list(out, [1.5, 2.5, -3.0])
    assert out.tolist() == [1.5, 2.5, -3.0]


def test_list_of_ints_is_an_int64_array(lib):
    out = torch.full((3,), -1, dtype=torch.int64)
    lib.from_long_list(out, [1, 2**33, -4])
    assert out.tolist() == [2, 2**34, -8]


def test_arg_casts_dict_narrows_scalars(lib):
    out = torch.full((2,), -1, dtype=torch.int32)
    lib.copy_i32(out, 7, arg_casts={1: "int32"})
    assert out.tolist() == [7, 7]


def test_arg_casts_every_small_type(lib, poison):
    out = poison(5)
    lib.casts(out, 1.5, 2.5, -300, -7, 200, threads=1,
              arg_casts={1: "fp16", 2: "bf16", 3: "int16", 4: "int8", 5: "uint8"})
    assert out.tolist() == [1.5, 2.5, -300.0, -7.0, 200.0]


def test_arg_casts_as_one_type_for_all_scalars(lib):
    out = torch.full((2,), -1, dtype=torch.int32)
    lib.copy_i32(out, 9, arg_casts="int32")
    assert out.tolist() == [9, 9]


def test_view_is_bound_at_its_storage_offset_and_storage_stays_addressable(lib, poison):
    base = torch.arange(10, dtype=torch.float32)
    view = base[3:7]
    out = poison(4)
    lib.neighbours(out, view)
    expected = [base[3 + i - 1] + base[3 + i + 1] for i in range(4)]
    assert out.tolist() == [float(v) for v in expected]


def test_non_contiguous_tensor_binds_its_storage(lib, poison):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    col = base[:, 1]  # stride 4
    out = poison(2)
    lib.neighbours(out, col, threads=2)
    # indices are relative to the view's first element, in storage order
    assert out.tolist() == [base.flatten()[0] + base.flatten()[2], base.flatten()[1] + base.flatten()[3]]


def test_threads_default_to_first_tensor_numel(lib, poison):
    out = poison(37)
    lib.full(out, 2.0)
    assert torch.all(out == 2.0)


def test_group_size_defaults_to_min_of_threads_and_1024(lib):
    out = torch.zeros(2000, dtype=torch.int32)
    lib.record_grid(out, threads=2000)
    # 2000 threads -> groups of 1024: the second is partial (976 threads)
    assert out[0].item() == 1024 * 10000 + 101
    assert out[1999].item() == 976 * 10000 + 101


def test_threads_and_group_size_as_lists(lib):
    out = torch.zeros(6 * 5 * 2, dtype=torch.int32)
    lib.record_grid(out, threads=[6, 5, 2], group_size=[4, 2, 2])
    grid = out.reshape(2, 5, 6)
    assert grid[0, 0, 0].item() == 40202
    assert grid[1, 4, 5].item() == 20102  # edge group: 2 x 1 x 2 of 4 x 2 x 2


def test_dispatch_threadgroups_counts_whole_groups(lib, poison):
    out = poison(64)
    lib.full.dispatch_threadgroups(out, 5.0, threadgroups=4, group_size=16)
    assert torch.all(out == 5.0)


def test_constant_struct_with_64_bit_fields(lib, poison):
    class Params(ctypes.Structure):
        _fields_ = [("n", ctypes.c_int64), ("scale", ctypes.c_float), ("pad", ctypes.c_int32),
                    ("offset", ctypes.c_uint64)]

    out = poison(8)
    lib.with_struct(out, Params(6, 0.5, 0, 10))
    assert out[:6].tolist() == [0.5 * (i + 10) for i in range(6)]
    assert torch.isnan(out[6:]).all()


def test_struct_from_bytes(lib, poison):
    import struct

    out = poison(4)
    lib.with_struct(out, struct.pack("<qfiQ", 4, 2.0, 0, 1))
    assert out.tolist() == [2.0, 4.0, 6.0, 8.0]


def test_numpy_arrays_are_buffers(lib):
    out = np.full(5, np.nan, np.float32)
    lib.full(out, 1.25)
    assert (out == 1.25).all()


def test_half_and_bfloat16_tensors(lib):
    x = torch.tensor([1.5, -2.25, 1000.0], dtype=torch.float16)
    lib.twice_half(x)
    assert x.tolist() == [3.0, -4.5, 2000.0]
    y = torch.tensor([1.5, -2.25, 3.0e38], dtype=torch.bfloat16)
    lib.twice_bfloat(y)
    assert y[:2].tolist() == [3.0, -4.5] and torch.isinf(y[2])


def test_bool_tensors(lib):
    x = torch.tensor([True, False, True])
    out = torch.zeros(3, dtype=torch.bool)
    lib.bool_tensor(out, x)
    assert out.tolist() == [False, True, False]


def test_complex64_tensors_are_float2(lib):
    x = torch.tensor([1 + 2j, -3 - 4j], dtype=torch.complex64)
    out = torch.full((2,), complex("nan+nanj"), dtype=torch.complex64)
    lib.complex_conj(out, x)
    assert torch.equal(out, x.conj())


def test_too_few_arguments_name_the_kernel_and_buffer(lib):
    with pytest.raises(TypeError, match=r"kernel 'full' reads buffer 1 \('val'\)"):
        lib.full(torch.zeros(4))


def test_buffer_smaller_than_the_struct_it_holds(lib):
    with pytest.raises(ValueError, match=r"kernel 'with_struct': buffer 1 \('p'\) holds 8 bytes.*reads 24"):
        lib.with_struct(torch.zeros(4), 3)


def test_float64_tensor_is_rejected_with_a_clear_message(lib):
    with pytest.raises(TypeError, match="float64.*Metal does not support"):
        lib.full(torch.zeros(4, dtype=torch.float64), 1.0)


def test_unknown_kernel_name_lists_the_kernels(lib):
    with pytest.raises(AttributeError, match="no kernel named 'nope'.*full"):
        lib.nope


def test_group_size_over_the_limit(lib):
    with pytest.raises(ValueError, match="at most 1024"):
        lib.full(torch.zeros(4096), 1.0, threads=4096, group_size=2048)


def test_compile_error_is_a_syntax_error_at_the_users_line():
    src = "kernel void k(device float* x, uint i [[thread_position_in_grid]]) {\n  x[i] = 1.0;\n  x[i] = y;\n}\n"
    with pytest.raises(SyntaxError) as info:
        metal_kernel.compile_shader(src)
    e = info.value
    assert isinstance(e, MetalCompileError)
    assert e.lineno == 3
    assert "undeclared identifier 'y'" in str(e)
    assert e.text.strip() == "x[i] = y;"
    assert "__mk" not in str(e).split("\n")[0]


def test_double_is_rejected():
    with pytest.raises(SyntaxError, match="'double' is not supported") as info:
        metal_kernel.compile_shader(
            "kernel void k(device float* x, uint i [[thread_position_in_grid]]) {\n"
            "  double d = x[i];\n  x[i] = d;\n}"
        )
    assert info.value.lineno == 2


def test_kernel_error_is_a_runtime_error():
    assert issubclass(KernelError, RuntimeError)
